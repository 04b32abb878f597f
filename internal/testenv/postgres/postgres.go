// Package postgres starts a throwaway PostgreSQL server for tests: Debian's
// `postgresql` package (installed by scripts/install.sh), a cluster
// initialised in a temporary directory and listening only on a unix socket
// in that directory (no TCP), stopped and removed at the end.
//
// A test binary shares one cluster (Shared), started on first use, and
// gives each test a database of its own (Cluster.NewDatabase); its TestMain
// calls StopShared. A missing PostgreSQL fails the tests, never skips them;
// under -short (the fast tier, which has no services) Shared skips them.
//
// It must never touch a cluster it did not create, listen on TCP, or leave
// its server running or its directory behind when stopped.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// superuser is the cluster's bootstrap role; the socket admits it without a
// password, and only users who can enter the directory reach the socket.
const superuser = "postgres"

// startWait bounds how long a new server may take to accept connections.
const startWait = 60 * time.Second

// Cluster is one running throwaway PostgreSQL server.
type Cluster struct {
	dir     string // socket directory; the cluster's files are in data/
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	dbs     atomic.Int64
	stop    sync.Once
	stopErr error
}

// Start initialises a cluster in a new temporary directory and starts its
// server. As root, the server runs as the `postgres` user (PostgreSQL
// refuses to run as root); otherwise as the calling user.
func Start() (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	// A short path: a unix socket's path is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "sr-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cred, err := serverCredential()
	if err == nil && cred != nil {
		err = os.Chown(dir, int(cred.Uid), int(cred.Gid))
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("postgres: %w", err)
	}
	c := &Cluster{dir: dir, exited: make(chan struct{})}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", superuser, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("postgres: initdb: %v\n%s", err, out)
	}
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer logFile.Close()
	// Durability is worth nothing in a cluster thrown away at the end, and
	// fsync on every commit would make the tests measure the disk.
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir,
		"-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=64MB")
	c.cmd.Dir = dir
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	// If the test binary dies, SIGQUIT is the server's immediate shutdown:
	// it takes its backends with it.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := c.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("postgres: start the server: %w", err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	if err := c.waitReady(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// binDir finds the newest installed PostgreSQL's programs.
func binDir() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(matches) == 0 {
		return "", errors.New("postgres: PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres): run scripts/install.sh")
	}
	sort.Slice(matches, func(i, j int) bool { return version(matches[i]) > version(matches[j]) })
	return filepath.Dir(matches[0]), nil
}

func version(postgresPath string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(postgresPath))))
	return n
}

// serverCredential is who runs the server: nil (the caller) unless root.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("the server cannot run as root and there is no postgres user: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

func (c *Cluster) waitReady() error {
	deadline := time.Now().Add(startWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("postgres: the server exited (%v):\n%s", c.waitErr, c.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres: not accepting connections after %s: %v\n%s", startWait, err, c.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) logTail() string {
	data, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// URL is the connection URL of database db on this cluster, over its
// socket.
func (c *Cluster) URL(db string) string {
	return (&url.URL{Scheme: "postgres", User: url.User(superuser), Path: "/" + db,
		RawQuery: url.Values{"host": {c.dir}}.Encode()}).String()
}

// DataDir is the cluster's data directory (tests look at what it holds on
// disk).
func (c *Cluster) DataDir() string { return filepath.Join(c.dir, "data") }

// Pid is the server's process id.
func (c *Cluster) Pid() int { return c.cmd.Process.Pid }

// NewDatabase creates an empty database for t and returns its URL. It is
// dropped when t ends (connections still open to it are ended first).
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), c.dbs.Add(1))
	if err := c.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("postgres: create database: %v", err)
	}
	t.Cleanup(func() {
		select {
		case <-c.exited:
			return // stopped already, and removed with its databases
		default:
		}
		if err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("postgres: drop database %s: %v", name, err)
		}
	})
	return c.URL(name)
}

// Exec runs one statement as the superuser in the maintenance database.
func (c *Cluster) Exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// Stop shuts the server down (fast shutdown: sessions are ended) and removes
// the cluster's directory. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stop.Do(func() {
		c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.exited:
		case <-time.After(30 * time.Second):
			c.cmd.Process.Kill()
			<-c.exited
			c.stopErr = errors.New("postgres: the server did not stop within 30 s of SIGINT; killed")
		}
		if err := os.RemoveAll(c.dir); err != nil && c.stopErr == nil {
			c.stopErr = fmt.Errorf("postgres: remove %s: %w", c.dir, err)
		}
	})
	return c.stopErr
}

var (
	sharedMu  sync.Mutex
	shared    *Cluster
	sharedErr error
)

// Shared returns the test binary's cluster, started on first use; t fails
// when it cannot start. The binary's TestMain must call StopShared.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	if testing.Short() {
		// The fast tier has no services (docs/design.md, "Test tiers").
		t.Skip("skipped under -short (the fast tier): needs a PostgreSQL server")
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = Start()
	}
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// StopShared stops the binary's cluster, if one was started.
func StopShared() error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		return nil
	}
	return shared.Stop()
}
