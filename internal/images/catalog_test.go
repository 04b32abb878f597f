package images

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestBuiltinCatalogIsConsistent(t *testing.T) {
	c, err := builtinCatalog()
	if err != nil {
		t.Fatalf("builtin catalog: %v", err)
	}
	var names []string
	for _, r := range c.Runtimes {
		names = append(names, r.Name)
		if _, ok := c.image(r.Image); !ok {
			t.Errorf("runtime %s: image %q not in catalog", r.Name, r.Image)
		}
		if !slices.ContainsFunc(r.Command, func(a string) bool { return strings.Contains(a, FilePlaceholder) }) {
			t.Errorf("runtime %s: command %q lacks %s", r.Name, r.Command, FilePlaceholder)
		}
		// Every catalog runtime says what its sessions keep.
		want := map[bool]string{true: SessionPython}[strings.HasPrefix(r.Name, "python")] +
			map[bool]string{true: SessionNode}[strings.HasPrefix(r.Name, "node")] + map[bool]string{true: SessionBash}[r.Name == "bash"]
		if r.Session != want {
			t.Errorf("runtime %s: session %q, want %q", r.Name, r.Session, want)
		}
		if strings.HasPrefix(r.Name, "python") && r.Env["MPLBACKEND"] != "Agg" {
			t.Errorf("runtime %s: MPLBACKEND = %q, want Agg", r.Name, r.Env["MPLBACKEND"])
		}
	}
	slices.Sort(names)
	if want := []string{"bash", "node20", "python3.11", "python3.13"}; !slices.Equal(names, want) {
		t.Errorf("runtimes = %v, want %v", names, want)
	}
	for _, img := range c.Images {
		used := slices.ContainsFunc(c.Runtimes, func(r Runtime) bool { return r.Image == img.Name })
		if !used {
			t.Errorf("image %s is used by no runtime", img.Name)
		}
	}
}

func TestRecipeHash(t *testing.T) {
	c, err := builtinCatalog()
	if err != nil {
		t.Fatal(err)
	}
	trixie, _ := c.image("trixie")
	bookworm, _ := c.image("bookworm")
	h := recipeHash(trixie)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(h) {
		t.Fatalf("hash %q is not hex sha256", h)
	}
	if again := recipeHash(trixie); again != h {
		t.Errorf("hash not stable: %s then %s", h, again)
	}
	// A fresh parse of the same data gives the same hash.
	c2, _ := builtinCatalog()
	if t2, _ := c2.image("trixie"); recipeHash(t2) != h {
		t.Error("hash differs between two parses of the catalog")
	}
	if recipeHash(bookworm) == h {
		t.Error("trixie and bookworm hash alike")
	}
	changed := trixie
	changed.Packages = append(slices.Clone(trixie.Packages), "python3-sklearn")
	if recipeHash(changed) == h {
		t.Error("adding a package did not change the hash")
	}
	changed = trixie
	changed.Customize = append(slices.Clone(trixie.Customize), "true")
	if recipeHash(changed) == h {
		t.Error("adding a hook did not change the hash")
	}
	if len(shortHash(h)) != 12 || !strings.HasPrefix(h, shortHash(h)) {
		t.Errorf("shortHash(%s) = %s", h, shortHash(h))
	}
}

func TestParseCatalogRejectsBadData(t *testing.T) {
	const img = `{"name":"img","suite":"trixie","packages":["bash"]}`
	cases := map[string]struct{ json, want string }{
		"unknown field":     {`{"images":[` + img + `],"runtimes":[],"extra":1}`, "unknown field"},
		"runtime bad image": {`{"images":[` + img + `],"runtimes":[{"name":"r","image":"nope","command":["/bin/sh","{file}"],"file":"m.sh"}]}`, `image "nope"`},
		"no placeholder":    {`{"images":[` + img + `],"runtimes":[{"name":"r","image":"img","command":["/bin/sh","main.sh"],"file":"m.sh"}]}`, "command"},
		"relative program":  {`{"images":[` + img + `],"runtimes":[{"name":"r","image":"img","command":["sh","{file}"],"file":"m.sh"}]}`, "absolute"},
		"bad file":          {`{"images":[` + img + `],"runtimes":[{"name":"r","image":"img","command":["/bin/sh","{file}"],"file":"a/b"}]}`, "file"},
		"bad runtime name":  {`{"images":[` + img + `],"runtimes":[{"name":"Py","image":"img","command":["/bin/sh","{file}"],"file":"m"}]}`, "name"},
		"duplicate image":   {`{"images":[` + img + `,` + img + `],"runtimes":[]}`, "duplicate"},
		"bad package":       {`{"images":[{"name":"img","suite":"trixie","packages":["bash,evil"]}],"runtimes":[]}`, "package name"},
		"unknown session":   {`{"images":[` + img + `],"runtimes":[{"name":"r","image":"img","command":["/bin/sh","{file}"],"file":"m.sh","session":"ruby"}]}`, `session: "ruby"`},
		"kernel, no warm":   {`{"images":[` + img + `],"runtimes":[{"name":"r","image":"img","command":["/bin/py","{file}"],"file":"m.py","session":"python"}]}`, "warm_command"},
		"no packages":       {`{"images":[{"name":"img","suite":"trixie","packages":[]}],"runtimes":[]}`, "packages"},
	}
	for name, tc := range cases {
		_, err := parseCatalog([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want mention of %q", name, err, tc.want)
		}
	}
}

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"python3.13", "node20", "bash", "a", "my_rt-1.0", strings.Repeat("a", 64)} {
		if err := ValidateName("runtime", ok); err != nil {
			t.Errorf("ValidateName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Python", "py thon", "../x", "a/b", ".hidden", "-x", strings.Repeat("a", 65), "ü"} {
		err := ValidateName("runtime", bad)
		if !errors.Is(err, ErrInvalidName) || !strings.HasPrefix(err.Error(), "runtime: ") {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName naming the field", bad, err)
		}
	}
}

func TestMmdebstrapArgs(t *testing.T) {
	c, _ := builtinCatalog()
	bookworm, _ := c.image("bookworm")
	args := mmdebstrapArgs(bookworm, "/x/out.tar")
	if args[0] != "--variant=minbase" {
		t.Errorf("first arg %q", args[0])
	}
	if n := len(args); args[n-3] != "--" || args[n-2] != "bookworm" || args[n-1] != "/x/out.tar" {
		t.Errorf("args end with %q", args[n-3:])
	}
	joined := strings.Join(args, "\n")
	for _, want := range []string{
		`--aptopt=APT::Install-Recommends "false"`,
		"--include=python3,",
		"--essential-hook=d=/tmp/scratchrun-stubs && ",
		"Package: python3-pythran",
		"--customize-hook=" + commonHooks[0],
		"--dpkgopt=path-exclude=/usr/share/doc/*",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("args lack %q", want)
		}
	}
	for _, a := range args {
		if strings.Contains(a, "\n") {
			t.Errorf("arg with a newline (mmdebstrap warns about those): %q", a)
		}
	}
	trixie, _ := c.image("trixie")
	if strings.Contains(strings.Join(mmdebstrapArgs(trixie, "/o.tar"), " "), "essential-hook") {
		t.Error("trixie has no stubs but got an essential hook")
	}
}
