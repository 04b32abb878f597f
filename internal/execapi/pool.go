package execapi

// PoolKey is what makes an engine's warm sandboxes interchangeable: the
// runtime, the network mode and the variant ("" for a runtime that
// pre-starts nothing; "light", an interpreter started; "heavy", its
// libraries imported). An engine reports its pool's figures under it, and
// every reader (the server's metrics, the console) takes its fields as
// they are: nothing joins them into a string to split again.
type PoolKey struct {
	Runtime string
	Network string
	Variant string
}

// String is how logs and reports show a key: runtime/network, and
// /variant when it has one. It is for people; nothing parses it.
func (k PoolKey) String() string {
	if k.Variant == "" {
		return k.Runtime + "/" + k.Network
	}
	return k.Runtime + "/" + k.Network + "/" + k.Variant
}
