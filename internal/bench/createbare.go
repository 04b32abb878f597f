package bench

import (
	"context"
	"fmt"
	"os/exec"
)

// unshareArgv makes a process in fresh user, pid, mount, network, ipc and
// uts namespaces (the sandbox's), mapped to root, that waits on its stdin:
// the least a sandbox is, with none of its mounts, cgroup or init.
var unshareArgv = []string{"unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount", "--net", "--ipc", "--uts", "cat"}

// BareNamespaces is the creation benchmark's baseline: one waiting
// process in fresh namespaces (see unshareArgv), ended by closing its
// stdin.
func BareNamespaces(ctx context.Context) (func() error, error) {
	cmd := exec.Command(unshareArgv[0], unshareArgv[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %v: %w", unshareArgv, err)
	}
	return func() error {
		_ = in.Close()
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("%v: %w", unshareArgv, err)
		}
		return nil
	}, nil
}
