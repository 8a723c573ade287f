package alerts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/internal/syncbuf"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
)

// alertmanager is Debian's Alertmanager (package prometheus-alertmanager),
// or the binary TOKENPROBE_ALERTMANAGER names.
func alertmanager(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TOKENPROBE_ALERTMANAGER"); p != "" {
		return p
	}
	for _, name := range []string{"prometheus-alertmanager", "alertmanager"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("TOKENPROBE_REQUIRE_ALERTMANAGER") != "" {
		t.Fatal("no Alertmanager on PATH, and TOKENPROBE_REQUIRE_ALERTMANAGER is set (apt-get install prometheus-alertmanager)")
	}
	t.Skip("no Alertmanager on PATH (apt-get install prometheus-alertmanager)")
	return ""
}

// The shipped configuration is one Alertmanager takes.
func TestAlertmanagerConfigChecks(t *testing.T) {
	amtool, err := exec.LookPath("amtool")
	if err != nil {
		alertmanager(t) // skips, or fails where it is required
		t.Skip("no amtool beside the Alertmanager")
	}
	out, err := exec.Command(amtool, "check-config", "alertmanager.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("%d inhibit rules", len(Inhibitions()))) {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
}

// The inhibitions hold in a real Alertmanager: a TTFT cliff at a holds
// back the goodput pages of a's profiles on its endpoint, not those of
// another endpoint nor another location's; a revoked key, a spent quota
// and an unreachable endpoint hold back the goodput, burn, latency and run
// alerts of their profile and endpoint at their location, and its quorum
// alerts; a starved probe holds back no page (its rules took its delay off
// already).
func TestInhibitionsInARealAlertmanager(t *testing.T) {
	bin := alertmanager(t)
	dir := t.TempDir()
	cfg, err := AlertmanagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alertmanager.yml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "alertmanager.yml"), "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=warn")
	var logs syncbuf.Buffer // written by exec's copier while a failure reads it
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr + "/api/v2"
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // the one Wait
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	timingtest.Until(t, func() string { return "the Alertmanager to answer; its log:\n" + logs.String() }, func() bool {
		resp, err := http.Get(base + "/status")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, func() bool {
		select {
		case <-exited:
			return true
		default:
			return false
		}
	})

	type alert struct {
		Labels map[string]string `json:"labels"`
	}
	cliff := func(profile, location string) alert {
		return alert{map[string]string{"alertname": "TokenprobeTTFTCliff", "severity": "page", "scope": "location", "profile": profile, "endpoint": "vllm", "location": location, "load_level": "8"}}
	}
	goodput := func(name, profile, endpoint, location string) alert {
		return alert{map[string]string{"alertname": name, "severity": "page", "scope": "location", "profile": profile, "endpoint": endpoint, "location": location}}
	}
	cause := func(name, profile, endpoint, location string) alert {
		return alert{map[string]string{"alertname": name, "severity": "page", "scope": "location", "profile": profile, "endpoint": endpoint, "location": location, "reason": "x"}}
	}
	post := []alert{
		{map[string]string{"alertname": "TokenprobeProbeStarved", "severity": "ticket", "scope": "location", "location": "b"}},
		{map[string]string{"alertname": "TokenprobeDispatchLagHigh", "severity": "ticket", "scope": "location", "profile": "late", "endpoint": "vllm", "location": "a"}},
		cliff("chat", "a"), cliff("chat", "b"),
		goodput("TokenprobeGoodputZero", "baseline", "vllm", "a"), goodput("TokenprobeGoodputBudgetBurn", "other", "tgi", "a"),
		goodput("TokenprobeGoodputBudgetBurn", "chat", "vllm", "c"),
		// A revoked key (openai), a spent quota (anthropic) and an
		// unreachable server (down), each with the alerts it sets off;
		// the quorum burn of the revoked key's profile across locations.
		cause("TokenprobeAuthFailing", "keyed", "openai", "a"), goodput("TokenprobeGoodputZero", "keyed", "openai", "a"),
		goodput("TokenprobeGoodputBudgetBurn", "keyed", "openai", "a"), goodput("TokenprobeNoSuccessfulRun", "keyed", "openai", "a"),
		{map[string]string{"alertname": "TokenprobeGoodputBudgetBurnQuorum", "severity": "page", "scope": "quorum", "profile": "keyed", "endpoint": "openai"}},
		cause("TokenprobeQuotaExhausted", "billed", "anthropic", "a"), goodput("TokenprobeGoodputBudgetBurn", "billed", "anthropic", "a"),
		cause("TokenprobeEndpointUnreachable", "down", "tgi", "a"), goodput("TokenprobeGoodputZero", "down", "tgi", "a"),
		goodput("TokenprobeTTFTTailDivergence", "down", "tgi", "a"),
		// The same profile's goodput at another location, where the key
		// is not refused: not held back.
		goodput("TokenprobeGoodputZero", "keyed", "openai", "b"),
	}
	body, _ := json.Marshal(post)
	resp, err := http.Post(base+"/alerts", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("posting alerts: %s", resp.Status)
	}
	type got struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			State       string   `json:"state"`
			InhibitedBy []string `json:"inhibitedBy"`
		} `json:"status"`
	}
	want := map[string]string{"TokenprobeTTFTCliff chat a": "active", "TokenprobeTTFTCliff chat b": "active",
		"TokenprobeProbeStarved  b": "active", "TokenprobeDispatchLagHigh late a": "active",
		"TokenprobeGoodputZero baseline a": "suppressed", "TokenprobeGoodputBudgetBurn other a": "active", "TokenprobeGoodputBudgetBurn chat c": "active",
		"TokenprobeAuthFailing keyed a": "active", "TokenprobeGoodputZero keyed a": "suppressed", "TokenprobeGoodputBudgetBurn keyed a": "suppressed",
		"TokenprobeNoSuccessfulRun keyed a": "suppressed", "TokenprobeGoodputBudgetBurnQuorum keyed ": "suppressed",
		"TokenprobeQuotaExhausted billed a": "active", "TokenprobeGoodputBudgetBurn billed a": "suppressed",
		"TokenprobeEndpointUnreachable down a": "active", "TokenprobeGoodputZero down a": "suppressed", "TokenprobeTTFTTailDivergence down a": "suppressed",
		"TokenprobeGoodputZero keyed b": "active"}
	var seen map[string]string
	// The Alertmanager marks an alert's inhibition when it is read: wait
	// for every alert to be there and processed, then its marks are its
	// answer.
	timingtest.Until(t, func() string { return fmt.Sprintf("the alerts marked %v; marked %v", want, seen) }, func() bool {
		resp, err := http.Get(base + "/alerts")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var all []got
		if json.NewDecoder(resp.Body).Decode(&all) != nil {
			return false
		}
		seen = map[string]string{}
		for _, a := range all {
			seen[a.Labels["alertname"]+" "+a.Labels["profile"]+" "+a.Labels["location"]] = a.Status.State
		}
		return fmt.Sprint(seen) == fmt.Sprint(want)
	}, func() bool {
		if len(seen) != len(want) {
			return false
		}
		for _, s := range seen {
			if s == "unprocessed" {
				return false
			}
		}
		return true
	})
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
