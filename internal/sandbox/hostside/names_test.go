package hostside

import (
	"os"
	"strings"
	"testing"
)

func TestInstanceNameAndAliveness(t *testing.T) {
	name, err := InstanceName(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !EngineAlive(name + "_1") {
		t.Errorf("%s_1: this engine reported dead", name)
	}
	if EngineAlive(strings.Replace(name, "_", "_9", 1) + "_1") {
		t.Errorf("an engine with another start time reported alive")
	}
	if !EngineAlive("not-ours") || !EngineAlive("e1_2_x") {
		t.Errorf("a foreign name must count as alive (never touched)")
	}
	if !InstanceAlive(name) || InstanceAlive(strings.Replace(name, "_", "_9", 1)) || !InstanceAlive("not-ours") {
		t.Errorf("InstanceAlive disagrees with EngineAlive on %s", name)
	}
}
