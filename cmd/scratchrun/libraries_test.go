package main

import (
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv"
)

// librariesCode uses each library the Python images add beyond numpy,
// pandas, matplotlib and scipy, the way an agent would.
const librariesCode = `import sklearn.linear_model, statsmodels.api as sm, seaborn, openpyxl, xlsxwriter, bs4, lxml.etree, networkx as nx, plotly.graph_objects as go, yaml, tabulate, numpy as np
X = np.arange(20.0).reshape(-1, 1); y = 3 * X.ravel() + 1
print(round(float(sklearn.linear_model.LinearRegression().fit(X, y).coef_[0]), 6))
print(round(float(sm.OLS(y, sm.add_constant(X)).fit().params[1]), 6))
ax = seaborn.lineplot(x=X.ravel(), y=y); ax.figure.savefig('/tmp/s.png')
wb = openpyxl.Workbook(); wb.active['A1'] = 42; wb.save('/tmp/a.xlsx'); print(openpyxl.load_workbook('/tmp/a.xlsx').active['A1'].value)
w = xlsxwriter.Workbook('/tmp/b.xlsx'); w.add_worksheet().write(0, 0, 'x'); w.close()
print(bs4.BeautifulSoup('<p class="a">hi</p>', 'lxml').p.text)
print(nx.shortest_path_length(nx.path_graph(5), 0, 4))
print(len(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])).to_html(include_plotlyjs=False)) > 0)
print(yaml.safe_load('a: [1, 2]'))
print(tabulate.tabulate([[1, 2]], headers=['a', 'b'], tablefmt='plain'))
`

// Both Python images have the libraries agents reach for, working, quietly
// (no warning on stderr), in a sandbox; node20 has npm.
func TestImageLibraries(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	want := "3.0\n3.0\n42\nhi\n4\nTrue\n{'a': [1, 2]}\n  a    b\n  1    2\n"
	for _, rt := range []string{"python3.13", "python3.11"} {
		r := scratchrun(t, t.TempDir(), "", "exec", "--runtime", rt, "--memory-mb", "512", "--timeout-ms", "30000", "--code", librariesCode)
		if r.code != 0 || r.stdout != want || r.stderr != "" {
			t.Errorf("%s: exit %d stdout %q (want %q) stderr %q", rt, r.code, r.stdout, want, r.stderr)
		}
	}
	r := scratchrun(t, t.TempDir(), "", "exec", "--runtime", "node20", "--code", "console.log(require('child_process').execSync('npm --version').toString().trim())")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "10.") {
		t.Errorf("npm in node20: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}
