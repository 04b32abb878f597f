# The README's chart example: numpy + matplotlib, saved as a PNG and returned
# with --return /tmp/chart.png.
import numpy as np
import matplotlib.pyplot as plt

x = np.linspace(0, 4 * np.pi, 400)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(x, np.sin(x), label="sin x")
ax.plot(x, np.sin(x) * np.exp(-x / 6), label="damped")
ax.set_title("Rendered in a ScratchRun sandbox")
ax.legend()
fig.tight_layout()
fig.savefig("/tmp/chart.png", dpi=100)
print("mean of damped wave:", float(np.mean(np.sin(x) * np.exp(-x / 6))))
