// Code generated from package initproto (initproto.CHeader); DO NOT EDIT.
// Regenerate: go test ./internal/sandbox/namespaces/spawner -run TestInitHeaderIsCurrent -update
#ifndef SCRATCHRUN_INITPROTO_H
#define SCRATCHRUN_INITPROTO_H

// ProtocolVersion: the first field of every setup message
#define INIT_PROTOCOL_VERSION 3
// ControlFD: engine -> init
#define INIT_CONTROL_FD 3
// StatusFD: init -> engine
#define INIT_STATUS_FD 4
// UpperFD: a session's overlay upper directory
#define INIT_UPPER_FD 5
// MaxSetupBytes
#define INIT_MAX_SETUP_BYTES 4194304
// MaxJobBytes
#define INIT_MAX_JOB_BYTES 1073741824
// SetupMessage.MapsGroups
#define SETUP_MAPS_GROUPS 1
// SetupMessage.JoinedNetwork
#define SETUP_JOINED_NETWORK 2
// SetupMessage.LockDownEarly
#define SETUP_LOCK_DOWN_EARLY 4
// SetupMessage.Prestart != nil
#define SETUP_PRESTART 8
// SetupMessage.CopyHome
#define SETUP_COPY_HOME 16
// SetupMessage.Session
#define SETUP_SESSION 32
// ResultMessage.Started
#define RESULT_STARTED 1
// ResultMessage.TimedOut
#define RESULT_TIMED_OUT 2
// ResultMessage.ProcessLimitHit
#define RESULT_PROCESS_LIMIT 4
// ResultMessage.Separated
#define RESULT_SEPARATED 8
// RequestJob
#define REQUEST_JOB 1
// RequestCancel
#define REQUEST_CANCEL 2
// RequestFileRead
#define REQUEST_FILE_READ 3
// RequestFileWrite
#define REQUEST_FILE_WRITE 4
// RequestEnd
#define REQUEST_END 5
// MaxFileReadBytes
#define INIT_MAX_FILE_READ_BYTES 268435456
// SeparateWithin
#define INIT_SEPARATE_WITHIN_MS 1000
// ResultMessage.ResidentStarted
#define RESULT_RESIDENT_STARTED 16
// ResultMessage.ResidentLost
#define RESULT_RESIDENT_LOST 32
// MaxKernelReply
#define INIT_MAX_KERNEL_REPLY 64
// MaxKernels
#define INIT_MAX_KERNELS 4

#endif
