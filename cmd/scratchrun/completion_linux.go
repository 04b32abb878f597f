package main

import (
	"maps"
	"slices"

	"github.com/scratchrun/scratchrun/internal/bench"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// The completions of the commands that run the engine, which only Linux
// builds have (the client build's table has none of them).
var (
	networkValues = []string{execapi.NetworkNone, execapi.NetworkEgress}

	execCompletion = completion{settings: []settings.Command{settings.Exec}, flags: []flagCompletion{
		flagOf("runtime", true, "runtime to run the code with"),
		flagOf("code", true, "program text"),
		flagOf("request", true, "a full request JSON"),
		flagOf("timeout-ms", true, "wall-clock limit in ms"),
		flagOf("memory-mb", true, "memory limit in MB"),
		flagOf("out", true, "directory for returned files"),
		flagOf("json", false, "print the result JSON"),
		flagOf("network", true, "network of the run", networkValues...),
		flagOf("env", true, "NAME=value for the sandbox"),
		flagOf("file", true, "SANDBOX_PATH=@HOST_FILE written before the run"),
		flagOf("return", true, "sandbox path to return"),
	}}
	serveCompletion  = completion{settings: []settings.Command{settings.Serve, settings.Frontend}}
	workerCompletion = completion{settings: []settings.Command{settings.Worker}}
	benchCompletion  = completion{settings: []settings.Command{settings.Bench}, flags: []flagCompletion{
		flagOf("workload", true, "what to run", slices.Sorted(maps.Keys(bench.Workloads))...),
		flagOf("n", true, "runs per side"),
		flagOf("concurrency", true, "runs in flight at once"),
		flagOf("network", true, "network of the runs", networkValues...),
		flagOf("warmup", true, "discarded runs per side"),
		flagOf("pool", false, "use the warm pool"),
		flagOf("builders", true, "warm sandboxes built at once"),
		flagOf("interval", true, "pause after each run"),
		flagOf("json", false, "print the report as JSON"),
		flagOf("idle-memory", false, "report idle warm sandboxes' memory"),
		flagOf("create", true, "CPU of creating N waiting sandboxes"),
		flagOf("sweep", true, "bursts of this many calls at once"),
		flagOf("rounds", true, "bursts per concurrency of --sweep"),
		flagOf("pause", true, "pause between the bursts of --sweep"),
		flagOf("session", false, "measure a call in a warm session against a plain call"),
		flagOf("cluster", false, "measure what a cluster's hop adds"),
		flagOf("admission-load", false, "measure admission alone beside sleeping sandboxes"),
		flagOf("cpuprofile", true, "write the engine's CPU profile to FILE"),
	}}
	keysSettings   = []settings.Command{settings.Keys}
	keyLimitFlags  = []flagCompletion{flagOf("rate", true, "runs per minute"), flagOf("concurrency", true, "requests in flight at once")}
	keysCompletion = completion{subs: []subcommand{
		{"create", "make a key", completion{settings: keysSettings, flags: append([]flagCompletion{flagOf("name", true, "a label for the key")}, keyLimitFlags...)}},
		{"list", "every key", completion{settings: keysSettings}},
		{"revoke", "refuse a key", completion{settings: keysSettings}},
		{"set", "change a key's limits", completion{settings: keysSettings, flags: keyLimitFlags}},
		{"usage", "runs, time and bytes per key", completion{settings: keysSettings, flags: []flagCompletion{
			flagOf("key", true, "one key"), flagOf("since", true, "from this time"), flagOf("runs", false, "list the runs")}}},
	}}
	imageSpecFlags = []flagCompletion{
		flagOf("command", true, "the runtime's command"),
		flagOf("file", true, "the file the code is written to"),
		flagOf("env", true, "NAME=value for the runtime"),
		flagOf("version", true, "the runtime's version"),
		flagOf("libraries", true, "libraries it offers"),
		flagOf("warm", true, "its warm kind"),
		flagOf("platform", true, "os/arch to pick"),
		flagOf("tag", true, "the image's tag"),
		flagOf("max-ratio", true, "largest expansion of a layer"),
		flagOf("max-size", true, "largest image"),
		flagOf("min-free", true, "space to leave free"),
	}
	imagesCompletion = completion{subs: []subcommand{
		{"build", "build the catalog's images", completion{flags: []flagCompletion{flagOf("force", false, "rebuild")}}},
		{"list", "the images and runtimes", completion{}},
		{"pull", "add a runtime from an OCI registry", completion{flags: append(slices.Clone(imageSpecFlags), flagOf("insecure", false, "plain HTTP registry"))}},
		{"push", "put a runtime's image, with its spec, into an OCI registry", completion{flags: []flagCompletion{flagOf("insecure", false, "plain HTTP registry")}}},
		{"import", "add a runtime from a tarball or OCI layout", completion{flags: imageSpecFlags}},
		{"export", "write a runtime's image as an OCI layout or archive", completion{}},
		{"alias", "name a runtime by another name", completion{flags: []flagCompletion{flagOf("remove", false, "remove the alias")}}},
		{"rm", "remove a runtime", completion{}},
		{"prune", "remove stale images", completion{}},
	}}
)
