package cloudauth

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/internal/hostile"
)

// A credentials endpoint that answers 60 MB (the container credentials
// of ECS and EKS Pod Identity, where AWS_CONTAINER_CREDENTIALS_FULL_URI
// points) is cut at MaxInfraBody: the SDK read it whole, and a run went
// to 253 MB. The request fails to be signed, naming the bound.
func TestACredentialsEndpointOf60MBIsCut(t *testing.T) {
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://"+h.Addr()+"/"+hostile.BigVector+"/creds")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	s, err := NewSigV4(context.Background(), "us-east-1", "bedrock", "")
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = s.Sign(context.Background(), "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse", http.Header{}, []byte("{}"))
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "not a token") {
		t.Fatalf("signed with a 60 MB credentials answer: %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("%d MB allocated reading a 60 MB credentials answer, want it cut at %d MB", got>>20, MaxInfraBody>>20)
	}
}
