package initproto

// PrestartJob encodes what a pre-started interpreter reads on its fd 3: the
// working directory, the program file (the last element of argv) and the
// environment, each ended by a NUL byte. Not JSON: parsing it must cost the
// interpreter no import (Python's json module alone took 13 ms to import
// here, a third of a bare `python3 -c 'print(1)'`). NUL cannot occur in any
// of these (exec would refuse it too). The C init writes the same form
// (deliver in spawner/c/job.c); the bootstraps that read it are in
// engine/warm.
func PrestartJob(argv, env []string, dir string) []byte {
	var b []byte
	b = append(append(b, dir...), 0)
	if len(argv) > 0 {
		b = append(b, argv[len(argv)-1]...)
	}
	b = append(b, 0)
	for _, kv := range env {
		b = append(append(b, kv...), 0)
	}
	return b
}
