package initproto

import (
	"bytes"
	"fmt"
)

// cConstants are the protocol's numbers as the C init names them.
var cConstants = []struct {
	name  string
	value uint64
	why   string
}{
	{"INIT_PROTOCOL_VERSION", ProtocolVersion, "ProtocolVersion: the first field of every setup message"},
	{"INIT_CONTROL_FD", ControlFD, "ControlFD: engine -> init"},
	{"INIT_STATUS_FD", StatusFD, "StatusFD: init -> engine"},
	{"INIT_UPPER_FD", UpperFD, "UpperFD: a session's overlay upper directory"},
	{"INIT_MAX_SETUP_BYTES", MaxSetupBytes, "MaxSetupBytes"},
	{"INIT_MAX_JOB_BYTES", MaxJobBytes, "MaxJobBytes"},
	{"SETUP_MAPS_GROUPS", setupMapsGroups, "SetupMessage.MapsGroups"},
	{"SETUP_JOINED_NETWORK", setupJoinedNetwork, "SetupMessage.JoinedNetwork"},
	{"SETUP_LOCK_DOWN_EARLY", setupLockDownEarly, "SetupMessage.LockDownEarly"},
	{"SETUP_PRESTART", setupPrestart, "SetupMessage.Prestart != nil"},
	{"SETUP_COPY_HOME", setupCopyHome, "SetupMessage.CopyHome"},
	{"SETUP_SESSION", setupSession, "SetupMessage.Session"},
	{"RESULT_STARTED", resultStarted, "ResultMessage.Started"},
	{"RESULT_TIMED_OUT", resultTimedOut, "ResultMessage.TimedOut"},
	{"RESULT_PROCESS_LIMIT", resultProcessLimit, "ResultMessage.ProcessLimitHit"},
	{"RESULT_SEPARATED", resultSeparated, "ResultMessage.Separated"},
	{"REQUEST_JOB", uint64(RequestJob), "RequestJob"},
	{"REQUEST_CANCEL", uint64(RequestCancel), "RequestCancel"},
	{"REQUEST_FILE_READ", uint64(RequestFileRead), "RequestFileRead"},
	{"REQUEST_FILE_WRITE", uint64(RequestFileWrite), "RequestFileWrite"},
	{"REQUEST_END", uint64(RequestEnd), "RequestEnd"},
	{"INIT_MAX_FILE_READ_BYTES", MaxFileReadBytes, "MaxFileReadBytes"},
	{"INIT_SEPARATE_WITHIN_MS", uint64(SeparateWithin.Milliseconds()), "SeparateWithin"},
	{"RESULT_RESIDENT_STARTED", resultResidentUp, "ResultMessage.ResidentStarted"},
	{"RESULT_RESIDENT_LOST", resultResidentLost, "ResultMessage.ResidentLost"},
	{"INIT_MAX_KERNEL_REPLY", MaxKernelReply, "MaxKernelReply"},
	{"INIT_MAX_KERNELS", MaxKernels, "MaxKernels"},
}

// CHeader is the C init's copy of the protocol's constants
// (namespaces/spawner/c/initproto.h): generated from this package, so that
// the two cannot drift (a test in package spawner fails while the file
// differs from it, and rewrites it with -update).
func CHeader() []byte {
	var b bytes.Buffer
	b.WriteString("// Code generated from package initproto (initproto.CHeader); DO NOT EDIT.\n")
	b.WriteString("// Regenerate: go test ./internal/sandbox/namespaces/spawner -run TestInitHeaderIsCurrent -update\n")
	b.WriteString("#ifndef SCRATCHRUN_INITPROTO_H\n#define SCRATCHRUN_INITPROTO_H\n\n")
	for _, c := range cConstants {
		fmt.Fprintf(&b, "// %s\n#define %s %d\n", c.why, c.name, c.value)
	}
	b.WriteString("\n#endif\n")
	return b.Bytes()
}
