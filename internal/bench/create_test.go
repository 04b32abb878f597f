package bench

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// fakeMeter charges what the fake creators say they cost.
type fakeMeter struct{ now CPUSample }

func (m *fakeMeter) Sample() CPUSample { return m.now }

func TestMeasureCreateChargesEachPhaseAndComparesWithTheBaseline(t *testing.T) {
	m := &fakeMeter{}
	kind := func(create, end time.Duration) Creator {
		return func(context.Context) (func() error, error) {
			m.now.Accounted += create
			m.now.Machine += create
			return func() error {
				m.now.Accounted += end / 2
				m.now.KernelThreads += end / 2
				m.now.Machine += end
				return nil
			}, nil
		}
	}
	kinds := []CreateKind{
		{Name: "bare", Create: kind(2*time.Millisecond, 2*time.Millisecond), Baseline: true},
		{Name: "sandbox", Create: kind(5*time.Millisecond, 3*time.Millisecond)},
	}
	r, err := MeasureCreate(context.Background(), m, kinds, CreateOptions{N: 4, Rounds: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 2 || r.Rows[1].Name != "sandbox" {
		t.Fatalf("rows %+v", r.Rows)
	}
	s := r.Rows[1]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(s.Create, 5) || !near(s.End, 3) || !near(s.Total, 8) || !near(s.KernelThreads, 1.5) || !near(s.Machine, 8) || !near(s.Ratio, 2) {
		t.Errorf("sandbox row %+v, want create 5, end 3, total 8, kernel threads 1.5, machine 8, ratio 2", s)
	}
	if !near(r.Rows[0].Ratio, 1) {
		t.Errorf("baseline ratio %v", r.Rows[0].Ratio)
	}
}

func TestMeasureCreateEndsWhatItMadeWhenACreationFails(t *testing.T) {
	made, ended := 0, 0
	boom := errors.New("boom")
	create := func(context.Context) (func() error, error) {
		if made == 2 {
			return nil, boom
		}
		made++
		return func() error { ended++; return nil }, nil
	}
	_, err := MeasureCreate(context.Background(), &fakeMeter{}, []CreateKind{{Name: "k", Create: create}}, CreateOptions{N: 5, Rounds: 1})
	if !errors.Is(err, boom) || ended != 2 {
		t.Fatalf("err %v, ended %d of 2", err, ended)
	}
}
