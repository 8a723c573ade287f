package config

import (
	"testing"
	"time"
)

func TestParseWindow(t *testing.T) {
	w, err := ParseWindow("22:00-06:00", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if w.Start != 22*time.Hour || w.End != 6*time.Hour || w.Loc.String() != "Europe/Berlin" {
		t.Fatalf("%+v", w)
	}
	for _, bad := range []string{"9-17", "09:00-09:00", "25:00-01:00", "09:00"} {
		if _, err := ParseWindow(bad, ""); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
