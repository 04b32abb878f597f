package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/scratchrun/scratchrun/client"
)

// Run code on the server SCRATCHRUN_API_URL names, with the key in
// SCRATCHRUN_API_KEY, and get a chart back as bytes. (No output is checked:
// it needs a server; TestExamplesAgainstServe runs it against one.)
func Example() {
	c, err := client.FromEnvironment(client.WithAutoIdempotency())
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Run(ctx, client.Request{
		Runtime: "python3.13",
		Code: `import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.savefig("/tmp/chart.png")
print("saved")`,
		ReturnFiles: []string{"/tmp/chart.png"},
		Limits:      client.Limits{TimeoutMS: 20000, MemoryMB: 512},
	})
	var apiErr *client.APIError
	switch {
	case errors.Is(err, client.ErrUnauthorized):
		log.Fatal("the server did not accept SCRATCHRUN_API_KEY")
	case errors.As(err, &apiErr) && apiErr.Field != "":
		log.Fatalf("bad request field %s: %s", apiErr.Field, apiErr.Message)
	case err != nil:
		log.Fatal(err)
	}
	fmt.Print(res.Stdout, res.Outcome, " ", len(res.Files["/tmp/chart.png"]), " bytes\n")
	if err := res.Save("/tmp/chart.png", "chart.png"); err != nil {
		log.Fatal(err)
	}
}

// Stream a run's output as it is written.
func ExampleClient_Stream() {
	c, err := client.FromEnvironment()
	if err != nil {
		log.Fatal(err)
	}
	code := "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(1)"
	for ev, err := range c.Stream(context.Background(), client.Request{Runtime: "python3.13", Code: code}) {
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Kind {
		case client.EventStdout, client.EventStderr:
			fmt.Print(ev.Text)
		case client.EventResult:
			fmt.Println("exit code", ev.Result.ExitCode)
		}
	}
}
