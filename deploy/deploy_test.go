// Package deploy holds the files an operator deploys a ScratchRun cluster
// with (NATS's configuration and permissions, systemd units, Kubernetes
// manifests and NATS's Helm values). Its tests read them as the real
// consumers would — nats-server's own configuration parser, the
// Kubernetes API types with unknown fields refused — and check what the
// cluster relies on; one (container_test.go, full tier) runs the container
// image the manifests name under podman, as the DaemonSet runs it.
package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// manifests decodes every Kubernetes manifest (all documents of every
// .yaml file but the Helm values) into its API type, refusing fields the
// type does not have: a misspelt field would otherwise be dropped in
// silence by the cluster's API server.
type manifests struct {
	daemonSets  map[string]*appsv1.DaemonSet
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	secrets     map[string]*corev1.Secret
	namespaces  map[string]*corev1.Namespace
	budgets     map[string]*policyv1.PodDisruptionBudget
}

func readManifests(t *testing.T) manifests {
	t.Helper()
	m := manifests{daemonSets: map[string]*appsv1.DaemonSet{}, deployments: map[string]*appsv1.Deployment{},
		services: map[string]*corev1.Service{}, secrets: map[string]*corev1.Secret{}, namespaces: map[string]*corev1.Namespace{},
		budgets: map[string]*policyv1.PodDisruptionBudget{}}
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests in kubernetes/")
	}
	for _, f := range files {
		if filepath.Base(f) == "nats-values.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			var obj any
			var name func() string
			switch head.APIVersion + " " + head.Kind {
			case "apps/v1 DaemonSet":
				o := &appsv1.DaemonSet{}
				obj, name = o, func() string { m.daemonSets[o.Name] = o; return o.Namespace }
			case "apps/v1 Deployment":
				o := &appsv1.Deployment{}
				obj, name = o, func() string { m.deployments[o.Name] = o; return o.Namespace }
			case "v1 Service":
				o := &corev1.Service{}
				obj, name = o, func() string { m.services[o.Name] = o; return o.Namespace }
			case "v1 Secret":
				o := &corev1.Secret{}
				obj, name = o, func() string { m.secrets[o.Name] = o; return o.Namespace }
			case "v1 Namespace":
				o := &corev1.Namespace{}
				obj, name = o, func() string { m.namespaces[o.Name] = o; return "scratchrun" }
			case "policy/v1 PodDisruptionBudget":
				o := &policyv1.PodDisruptionBudget{}
				obj, name = o, func() string { m.budgets[o.Name] = o; return o.Namespace }
			default:
				t.Fatalf("%s document %d: %s %s is a kind this test does not know", f, i, head.APIVersion, head.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", f, i, head.Kind, err)
			}
			if ns := name(); ns != "scratchrun" {
				t.Errorf("%s document %d (%s) is in namespace %q, not scratchrun", f, i, head.Kind, ns)
			}
		}
	}
	return m
}

func stripComments(doc string) string {
	return regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")
}

// The workers are a privileged DaemonSet with the image cache and the
// cgroups of the host, probed on the port their --health-addr serves,
// given time to drain; the front ends are an unprivileged Deployment
// behind a Service, ready when a worker is live; every secret they read
// exists with its key.
func TestKubernetesManifests(t *testing.T) {
	m := readManifests(t)
	ds := m.daemonSets["scratchrun-worker"]
	if ds == nil {
		t.Fatal("no scratchrun-worker DaemonSet")
	}
	pod := ds.Spec.Template.Spec
	worker := container(t, pod.Containers, "worker")
	if sc := worker.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Error("the worker is not privileged: it could not make namespaces, cgroups or nftables rules")
	}
	if len(worker.Args) == 0 || worker.Args[0] != "worker" || !hasArgPrefix(worker.Args, "--nats=tls://") || !hasArgPrefix(worker.Args, "--nats-ca=") {
		t.Errorf("worker args %v: want `worker --nats=tls://... --nats-ca=...`", worker.Args)
	}
	for path, why := range map[string]string{"/var/lib/scratchrun": "the image cache", "/sys/fs/cgroup": "the host's cgroups", "/run/scratchrun": "state a restarted worker sweeps"} {
		if !mountsHostPath(pod, worker, path) {
			t.Errorf("the worker does not mount the host's %s (%s) at the same path", path, why)
		}
	}
	images := container(t, pod.InitContainers, "images")
	if !slices.Equal(images.Command, []string{"scratchrun", "images", "build"}) || !mountsHostPath(pod, images, "/var/lib/scratchrun") {
		t.Errorf("the init container does not build the images into the host's cache: %v", images.Command)
	}
	healthPort := 0
	for _, a := range worker.Args {
		if v, ok := strings.CutPrefix(a, "--health-addr="); ok {
			healthPort, _ = strconv.Atoi(v[strings.LastIndexByte(v, ':')+1:])
		}
	}
	checkProbes(t, "worker", worker, healthPort)
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < 45 {
		t.Errorf("the worker's grace period %v is shorter than a run's 30 s timeout and its drain", g)
	}
	checkSecretRefs(t, m, pod)

	dep := m.deployments["scratchrun-frontend"]
	if dep == nil {
		t.Fatal("no scratchrun-frontend Deployment")
	}
	fpod := dep.Spec.Template.Spec
	fe := container(t, fpod.Containers, "frontend")
	if sc := fe.SecurityContext; sc == nil || sc.Privileged != nil && *sc.Privileged || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("the front end is not locked down: %+v", sc)
	}
	if psc := fpod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("the front end may run as root")
	}
	if len(fe.Args) == 0 || fe.Args[0] != "serve" || !hasArgPrefix(fe.Args, "--nats=tls://") || !hasArgPrefix(fe.Args, "--addr=0.0.0.0:") {
		t.Errorf("front end args %v", fe.Args)
	}
	checkProbes(t, "front end", fe, int(containerPort(fe, "http")))
	// One image, scripts/container-image.sh's, whose entrypoint is
	// scratchrun (TestContainerImageServesUnderPodman runs it so): the
	// containers pass arguments; the init container names scratchrun,
	// which is on the image's PATH.
	for name, c := range map[string]corev1.Container{"worker": worker, "front end": fe} {
		if len(c.Command) != 0 {
			t.Errorf("the %s overrides the image's entrypoint with %v", name, c.Command)
		}
	}
	if worker.Image == "" || images.Image != worker.Image || fe.Image != worker.Image {
		t.Errorf("the worker, its init container and the front end run different images: %q, %q, %q", worker.Image, images.Image, fe.Image)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 2 {
		t.Error("fewer than two front ends: one's loss stops the service")
	}
	checkSecretRefs(t, m, fpod)
	svc := m.services["scratchrun"]
	if svc == nil || !selects(svc.Spec.Selector, dep.Spec.Template.Labels) || svc.Spec.Ports[0].TargetPort.StrVal != "http" {
		t.Errorf("the Service does not reach the front ends: %+v", svc)
	}
	if pdb := m.budgets["scratchrun-frontend"]; pdb == nil || !selects(pdb.Spec.Selector.MatchLabels, dep.Spec.Template.Labels) {
		t.Error("no disruption budget over the front ends")
	}
	if !selects(ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels) || !selects(dep.Spec.Selector.MatchLabels, dep.Spec.Template.Labels) {
		t.Error("a selector does not match its own pods")
	}
	if ns := m.namespaces["scratchrun"]; ns == nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Error("the namespace does not admit the privileged workers")
	}
}

func container(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

func hasArgPrefix(args []string, prefix string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, prefix) })
}

// mountsHostPath reports whether c mounts the host's path at the same path.
func mountsHostPath(pod corev1.PodSpec, c corev1.Container, path string) bool {
	for _, v := range pod.Volumes {
		if v.HostPath == nil || v.HostPath.Path != path {
			continue
		}
		for _, vm := range c.VolumeMounts {
			if vm.Name == v.Name && vm.MountPath == path && !vm.ReadOnly {
				return true
			}
		}
	}
	return false
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// checkProbes wants /healthz as liveness and /readyz as readiness, on a
// port the container declares and serves on (port).
func checkProbes(t *testing.T, who string, c corev1.Container, port int) {
	t.Helper()
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path {
			t.Errorf("%s: no %s probe", who, path)
			continue
		}
		p := probe.HTTPGet.Port
		if got := containerPort(c, p.StrVal); p.StrVal != "" && int(got) != port || p.StrVal == "" && p.IntValue() != port || port == 0 {
			t.Errorf("%s: the %s probe asks port %s; the container serves on %d", who, path, p.String(), port)
		}
	}
}

// checkSecretRefs wants every secret a pod reads to be in the example
// secrets, with the key it reads.
func checkSecretRefs(t *testing.T, m manifests, pod corev1.PodSpec) {
	t.Helper()
	has := func(name, key string) bool {
		s := m.secrets[name]
		if s == nil {
			return false
		}
		_, ok := s.StringData[key]
		return ok || key == ""
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil && !has(v.Secret.SecretName, "") {
			t.Errorf("volume %s reads a secret %s that secrets.example.yaml does not show", v.Name, v.Secret.SecretName)
		}
	}
	for _, c := range append(slices.Clone(pod.Containers), pod.InitContainers...) {
		for _, e := range c.Env {
			if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && !has(r.SecretKeyRef.Name, r.SecretKeyRef.Key) {
				t.Errorf("%s reads %s/%s, which secrets.example.yaml does not show", e.Name, r.SecretKeyRef.Name, r.SecretKeyRef.Key)
			}
		}
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// natsPasswords are the variables deploy/nats's files read from the
// environment.
var natsPasswords = []string{"SCRATCHRUN_NATS_FRONTEND_PASSWORD", "SCRATCHRUN_NATS_WORKER_1_PASSWORD",
	"SCRATCHRUN_NATS_WORKER_2_PASSWORD", "SCRATCHRUN_NATS_WORKER_3_PASSWORD"}

// nats-server's own parser takes the cluster's configuration (with test
// certificates in place of /etc/nats/tls), and it says what the cluster
// relies on: TLS for clients and routes, JetStream, NATS's default
// message size (ScratchRun cuts larger ones into parts), three routes, and
// the users of auth.conf with the permissions the front ends and workers
// need and no more.
func TestNATSServerConfig(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := natsserver.WriteTestPKI(t, dir)
	conf, err := os.ReadFile("nats/nats-server.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf = bytes.ReplaceAll(conf, []byte("/etc/nats/tls/ca.pem"), []byte(ca))
	conf = bytes.ReplaceAll(conf, []byte("/etc/nats/tls/server.pem"), []byte(cert))
	conf = bytes.ReplaceAll(conf, []byte("/etc/nats/tls/server-key.pem"), []byte(key))
	auth, err := os.ReadFile("nats/auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "nats-server.conf"), conf, 0o600)
	os.WriteFile(filepath.Join(dir, "auth.conf"), auth, 0o600)
	t.Setenv("NATS_SERVER_NAME", "nats-1")
	for _, v := range natsPasswords {
		t.Setenv(v, "secret-"+v)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "nats-server.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if opts.ServerName != "nats-1" || !opts.JetStream || opts.TLSConfig == nil || opts.Cluster.TLSConfig == nil ||
		opts.Cluster.Name != "scratchrun" || len(opts.Routes) != 3 || opts.MaxPayload != 1<<20 {
		t.Errorf("name %q, JetStream %v, client TLS %v, route TLS %v, cluster %q, %d routes, max payload %d", opts.ServerName, opts.JetStream,
			opts.TLSConfig != nil, opts.Cluster.TLSConfig != nil, opts.Cluster.Name, len(opts.Routes), opts.MaxPayload)
	}
	users := map[string]*server.User{}
	for _, u := range opts.Users {
		users[u.Username] = u
	}
	fe := users["frontend"]
	if fe == nil || fe.Password != "secret-SCRATCHRUN_NATS_FRONTEND_PASSWORD" {
		t.Fatalf("no front end user with its password from the environment: %+v", fe)
	}
	if !slices.Contains(fe.Permissions.Publish.Allow, cluster.CallPrefix+".*.*") || !slices.Equal(fe.Permissions.Subscribe.Allow, []string{"_INBOX.>"}) {
		t.Errorf("front end permissions %+v", fe.Permissions)
	}
	for i := 1; i <= 3; i++ {
		id := "worker-" + strconv.Itoa(i)
		w := users[id]
		if w == nil || w.Password != "secret-SCRATCHRUN_NATS_WORKER_"+strconv.Itoa(i)+"_PASSWORD" {
			t.Errorf("no user %s with its password from the environment", id)
			continue
		}
		p := w.Permissions
		if !slices.Equal(p.Publish.Allow, []string{cluster.RegistrySubject(id)}) || !slices.Equal(p.Subscribe.Allow, []string{cluster.WorkerCalls(id)}) ||
			p.Response == nil || p.Response.MaxMsgs < 1000 {
			t.Errorf("%s may %+v / %+v / %+v; want its own registration and calls, and to answer them", id, p.Publish, p.Subscribe, p.Response)
		}
	}
	// The Helm values grant the same as auth.conf.
	values := helmValues(t)
	merge := dig(values, "config", "merge", "authorization", "users").([]any)
	var valuesFE map[string]any
	for _, u := range merge {
		if u.(map[string]any)["user"] == "frontend" {
			valuesFE = u.(map[string]any)
		}
	}
	if valuesFE == nil {
		t.Fatal("the Helm values have no front end user")
	}
	var allow []string
	for _, s := range dig(valuesFE, "permissions", "publish", "allow").([]any) {
		allow = append(allow, s.(string))
	}
	if !slices.Equal(allow, fe.Permissions.Publish.Allow) {
		t.Errorf("the Helm values let front ends publish %v; auth.conf %v", allow, fe.Permissions.Publish.Allow)
	}
}

// The Helm values run three servers with JetStream in memory and TLS.
func TestNATSHelmValues(t *testing.T) {
	v := helmValues(t)
	for path, want := range map[string]any{
		"config.cluster.enabled": true, "config.cluster.replicas": float64(3), "config.cluster.tls.enabled": true,
		"config.jetstream.enabled": true, "config.jetstream.memoryStore.enabled": true, "config.nats.tls.enabled": true,
		"config.merge.max_payload": float64(1 << 20),
	} {
		if got := dig(v, strings.Split(path, ".")...); got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
}

func helmValues(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile("kubernetes/nats-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// The systemd units run the commands as the cluster needs: a worker as
// root whose SIGTERM reaches it alone (its sandboxes' helper would die
// with a group-wide one) with time to drain, a front end as a dynamic
// unprivileged user; both read their settings from an environment file
// whose example sets what they need.
func TestSystemdUnits(t *testing.T) {
	worker := unit(t, "../packaging/systemd/scratchrun-worker.service")
	if worker["ExecStart"] != "/usr/bin/scratchrun worker" || worker["KillMode"] != "mixed" || worker["KillSignal"] != "SIGTERM" ||
		seconds(worker["TimeoutStopSec"]) < 45 || worker["User"] != "" || worker["DynamicUser"] != "" {
		t.Errorf("worker unit %v", worker)
	}
	fe := unit(t, "../packaging/systemd/scratchrun-frontend.service")
	if !strings.HasPrefix(fe["ExecStart"], "/usr/bin/scratchrun serve ") || fe["DynamicUser"] != "yes" || fe["NoNewPrivileges"] != "yes" ||
		seconds(fe["TimeoutStopSec"]) < 45 {
		t.Errorf("front end unit %v", fe)
	}
	for file, want := range map[string][]string{
		"systemd/worker.env.example":   {"SCRATCHRUN_NATS", "SCRATCHRUN_NATS_CA", "SCRATCHRUN_NATS_USER", "SCRATCHRUN_NATS_PASSWORD"},
		"systemd/frontend.env.example": {"SCRATCHRUN_NATS", "SCRATCHRUN_NATS_CA", "SCRATCHRUN_NATS_USER", "SCRATCHRUN_NATS_PASSWORD", "SCRATCHRUN_DB"},
		"nats/nats.env.example":        append([]string{"NATS_SERVER_NAME"}, natsPasswords...),
	} {
		set := envFile(t, file)
		for _, name := range want {
			if _, ok := set[name]; !ok {
				t.Errorf("%s does not set %s", file, name)
			}
		}
	}
	if n := unit(t, "systemd/nats-server.service"); !strings.Contains(n["ExecStart"], "--config /etc/nats/nats-server.conf") || n["EnvironmentFile"] != "/etc/nats/nats.env" {
		t.Errorf("nats unit %v", n)
	}
}

// unit reads a unit file's settings (the last of each name).
func unit(t *testing.T, path string) map[string]string {
	t.Helper()
	return keyValues(t, path, "=")
}

func envFile(t *testing.T, path string) map[string]string { return keyValues(t, path, "=") }

func keyValues(t *testing.T, path, sep string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, sep)
		if !ok {
			t.Errorf("%s: %q is not NAME%sVALUE", path, line, sep)
			continue
		}
		out[k] = v
	}
	return out
}

func seconds(v string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(v, "s"))
	return n
}
