package console

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data map[string]json.RawMessage
}

func readEvents(t *testing.T, body string) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[len("data: "):]), &cur.data); err != nil {
				t.Fatalf("event %s data: %v", cur.name, err)
			}
		case line == "" && cur.name != "":
			out = append(out, cur)
			cur = sseEvent{}
		}
	}
	return out
}

var png1x1 = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

// A playground run goes through the gate as the console, streams its
// output, ends with the result (files included), and is recorded in usage
// under the console.
func TestPlaygroundRun(t *testing.T) {
	tc := startConsole(t, consoleOptions{respond: func(ctx context.Context, c execapitest.Call) execapitest.Response {
		res := execapitest.Exit(0, "one\ntwo\n", execapi.Facts{})
		res.Files = map[string]string{"/tmp/chart.png": base64.StdEncoding.EncodeToString(png1x1)}
		return execapitest.Response{Result: res, Events: []execapi.Event{
			{Kind: execapi.EventStdout, Data: []byte("one\n")}, {Kind: execapi.EventStdout, Data: []byte("two\n")},
			{Kind: execapi.EventStderr, Data: []byte("warn\n")},
		}}
	}})
	// With a key in the store the server is closed to callers without one:
	// the console's runs pass as the console, not as "no key".
	if _, _, err := tc.keys.CreateKey(context.Background(), store.NewKey{Name: "k", RatePerMin: 1, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	b := tc.browser()
	b.signIn()
	r := b.post("/console/api/run", `{"runtime":"python3.13","code":"print(1)","return_files":["/tmp/chart.png"],"env":{"SECRET":"hunter2"}}`)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("run: %d %v %s", r.status, r.header, r.body)
	}
	events := readEvents(t, r.body)
	var names []string
	var stdout strings.Builder
	for _, e := range events {
		names = append(names, e.name)
		if e.name == "stdout" {
			var b []byte
			json.Unmarshal(e.data["b64"], &b)
			stdout.Write(b)
		}
	}
	if strings.Join(names, ",") != "started,stdout,stdout,stderr,result" || stdout.String() != "one\ntwo\n" {
		t.Fatalf("events %v, streamed stdout %q", names, stdout.String())
	}
	var res execapi.Result
	if err := json.Unmarshal(events[len(events)-1].data["result"], &res); err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "one\ntwo\n" || res.Outcome != execapi.OutcomeSuccess || res.Files["/tmp/chart.png"] == "" {
		t.Errorf("result %+v", res)
	}
	calls := tc.fake.Ran()
	if len(calls) != 1 || calls[0].Caller != httpapi.ConsoleCaller || calls[0].Checked.Env["SECRET"] != "hunter2" {
		t.Errorf("the service saw %+v", calls)
	}
	rows, _ := tc.keys.ListUsage(context.Background(), store.UsageFilter{})
	if len(rows) != 1 || rows[0].KeyID != httpapi.ConsoleCaller || rows[0].Runtime != "python3.13" {
		t.Errorf("usage %+v", rows)
	}
}

// Bad requests are refused before the stream starts, naming the field; a
// refusal of the gate or the engine ends the stream with the API's answer.
func TestPlaygroundErrors(t *testing.T) {
	tc := startConsole(t, consoleOptions{})
	b := tc.browser()
	b.signIn()
	for body, field := range map[string]string{
		`{"runtime":"bash","code":"true","limits":{"timeout_ms":0}}`: "limits.timeout_ms",
		`{"runtime":"bash","code":"true","CODE":"x"}`:                "CODE",
		`not json`: "",
	} {
		r := b.post("/console/api/run", body)
		if r.status != http.StatusBadRequest {
			t.Errorf("run %s: %d %s", body, r.status, r.body)
			continue
		}
		if d := errorOf(t, r); field != "" && !strings.Contains(d.Message, field) {
			t.Errorf("run %s: %+v, want it to name %s", body, d, field)
		}
	}
	r := b.post("/console/api/run", `{"runtime":"cobol","code":"true"}`)
	events := readEvents(t, r.body)
	if r.status != http.StatusOK || len(events) != 1 || events[0].name != "error" {
		t.Fatalf("unknown runtime: %d %s", r.status, r.body)
	}
	var d httpapi.ErrorDetail
	json.Unmarshal(events[0].data["error"], &d)
	if string(events[0].data["status"]) != "400" || d.Field != "runtime" || !strings.Contains(d.Message, "bash") {
		t.Errorf("unknown runtime: %s", r.body)
	}
	if len(tc.fake.Ran()) != 0 {
		t.Errorf("refused requests ran: %+v", tc.fake.Ran())
	}
}

// The Live page's figures are the server's: its service's admission state
// when it has one (the engine's), else only the calls in flight.
func TestLiveState(t *testing.T) {
	tc := startConsole(t, consoleOptions{})
	b := tc.browser()
	b.signIn()
	var v liveView
	b.getJSON("/console/api/live", &v)
	if v.InFlight != 0 || v.Admission.Mode != ModeNone || v.Pools == nil {
		t.Errorf("live %+v", v)
	}

	admitting := startConsole(t, consoleOptions{admission: &execapi.AdmissionInfo{
		Running: 7, Waiting: 2, Capacity: 1024, MemoryBudgetBytes: 1 << 30, CPUThreshold: 0.8,
		Rejections: map[execapi.RefusalReason]int64{execapi.RefusedMemory: 3},
	}})
	ab := admitting.browser()
	ab.signIn()
	ab.getJSON("/console/api/live", &v)
	a := v.Admission
	if a.Mode != ModeResources || a.MemoryBudgetBytes != 1<<30 || a.Running != 7 || v.InFlight != 7 || v.Queued != 2 || v.Capacity != 1024 || a.Rejections["memory"] != 3 {
		t.Errorf("live with the engine's admission: %+v", v)
	}
}

// The Live page shows each warm pool by its key's fields as the engine
// reports them, in order.
func TestLivePools(t *testing.T) {
	tc := startConsole(t, consoleOptions{pools: map[execapi.PoolKey]int{
		{Runtime: "python3.13", Network: "none", Variant: "light"}: 0,
		{Runtime: "python3.13", Network: "none", Variant: "heavy"}: 2,
		{Runtime: "bash", Network: "none"}:                         1,
		{Runtime: "bash", Network: "egress"}:                       3,
	}})
	b := tc.browser()
	b.signIn()
	var v liveView
	b.getJSON("/console/api/live", &v)
	want := []poolView{
		{Runtime: "bash", Network: "egress", Ready: 3},
		{Runtime: "bash", Network: "none", Ready: 1},
		{Runtime: "python3.13", Network: "none", Variant: "heavy", Ready: 2},
		{Runtime: "python3.13", Network: "none", Variant: "light", Ready: 0},
	}
	if !slices.Equal(v.Pools, want) {
		t.Errorf("pools %+v, want %+v", v.Pools, want)
	}
}
