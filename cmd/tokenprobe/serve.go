package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
	toolkitweb "github.com/prometheus/exporter-toolkit/web"
	"gopkg.in/yaml.v3"

	"github.com/tokenprobe/tokenprobe/internal/daemon"
	"github.com/tokenprobe/tokenprobe/internal/memreturn"
	"github.com/tokenprobe/tokenprobe/internal/runonce"
	"github.com/tokenprobe/tokenprobe/internal/web"
)

type serveOptions struct {
	configFile        string
	artifactsDir      string
	artifactsRetain   int
	storagePath       string
	web               *toolkitweb.FlagConfig
	lifecycle         bool
	checkInterval     time.Duration
	allowedHosts      []string
	maxConcurrentRuns int
	shutdownTimeout   time.Duration
	shardCount        int
	shardIndex        int // -1: from the StatefulSet ordinal in the hostname
	location          string
}

// locationName is a --probe.location: a label value kept short and plain,
// as it is on every series.
var locationName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// ordinal reads a StatefulSet pod's ordinal from its hostname (tokenprobe-2).
func ordinal() (int, error) {
	host, err := os.Hostname()
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(host, '-')
	n, err := strconv.Atoi(host[i+1:])
	if i < 0 || err != nil || n < 0 {
		return 0, fmt.Errorf("hostname %q does not end in a StatefulSet ordinal: set --shard.index", host)
	}
	return n, nil
}

// checkWebConfig refuses a --web.config.file that would serve plain HTTP
// with no authentication: an empty file, or one that sets neither TLS nor
// basic auth. Such a file is a mistake (a secret mount that came up empty),
// and the exporter toolkit would fail open on it. Without the flag, plain
// HTTP is what was asked for.
func checkWebConfig(path *string) error {
	if path == nil || *path == "" {
		return nil
	}
	if err := toolkitweb.Validate(*path); err != nil {
		return fmt.Errorf("%s: %w", *path, err)
	}
	data, err := os.ReadFile(*path)
	if err != nil {
		return err
	}
	var c struct {
		TLS struct {
			Cert     string `yaml:"cert"`
			CertFile string `yaml:"cert_file"`
		} `yaml:"tls_server_config"`
		Users map[string]any `yaml:"basic_auth_users"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("%s: %w", *path, err)
	}
	if c.TLS.Cert == "" && c.TLS.CertFile == "" && len(c.Users) == 0 {
		return fmt.Errorf("%s sets neither tls_server_config nor basic_auth_users, so every endpoint would be served in plain HTTP without authentication; give TLS or users, or leave the flag out to mean plain HTTP", *path)
	}
	return nil
}

// serve runs the daemon until ctx ends (SIGTERM, SIGINT), reloading on
// every value from hup (SIGHUP). It returns the process exit code.
func serve(ctx context.Context, o serveOptions, logger *slog.Logger, hup <-chan os.Signal) int {
	if o.location != "" && !locationName.MatchString(o.location) {
		logger.Error("--probe.location: give a short name of letters, digits, '.', '_' or '-' (eu-west-1, dc2.rack4)", "location", o.location)
		return runonce.ExitConfig
	}
	reg := prometheus.NewRegistry()
	// The location is a label of every series, the registry's as an
	// external label is Prometheus's: no collector adds it itself.
	var registerer prometheus.Registerer = reg
	if o.location != "" {
		registerer = prometheus.WrapRegistererWith(prometheus.Labels{"location": o.location}, reg)
	}
	registerer.MustRegister(
		versioncollector.NewCollector("tokenprobe"),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	v := version.Version
	if v == "" {
		v = "dev" // go run, or a build without the Makefile's version stamp
	}
	logger.Info("starting tokenprobe", "version", version.Info(), "build", version.BuildContext(), "config", o.configFile)
	if o.shardCount > 1 && o.shardIndex < 0 {
		n, err := ordinal()
		if err != nil {
			logger.Error("cannot tell this replica's shard", "err", err)
			return runonce.ExitConfig
		}
		o.shardIndex = n
	}
	if o.shardCount > 1 && o.shardIndex >= o.shardCount {
		logger.Error("shard index out of range", "index", o.shardIndex, "count", o.shardCount)
		return runonce.ExitConfig
	}
	if err := checkWebConfig(o.web.WebConfigFile); err != nil {
		logger.Error("--web.config.file", "err", err)
		return runonce.ExitConfig
	}
	// After a burst (a hostile endpoint's 60 MB answers) the heap's
	// pages go back to the system within a minute, not when a GC that
	// an idle daemon does not need happens to lower the heap goal; and
	// when the last run ends, what it allocated goes back at once.
	ret := &memreturn.Returner{Threshold: memreturn.DefaultThreshold, MinGap: memreturn.DefaultMinGap, SettleGap: memreturn.DefaultSettleGap}
	// Between runs the heap keeps less headroom: the daemon starts idle.
	idleGC := &memreturn.IdleGC{}
	idleGC.Idle()
	defer idleGC.Busy() // the process's own percent back as serve returns
	d, err := daemon.New(daemon.Options{
		ConfigFile: o.configFile, Logger: logger, Registerer: registerer, Location: o.location,
		MaxConcurrentRuns: o.maxConcurrentRuns, Version: v,
		ShardIndex: max(o.shardIndex, 0), ShardCount: o.shardCount,
		ArtifactsDir: o.artifactsDir, ArtifactsRetain: o.artifactsRetain, StoragePath: o.storagePath,
		OnIdle: func() { idleGC.Idle(); ret.Settle() }, OnBusy: idleGC.Busy,
	})
	if err != nil {
		logger.Error("cannot start", "err", err)
		return runonce.ExitConfig
	}
	srv := &http.Server{
		Handler:           web.Handler(d, web.Options{Lifecycle: o.lifecycle, Gatherer: reg, Registerer: registerer, Logger: logger, Version: v, AllowedHosts: o.allowedHosts}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- toolkitweb.ListenAndServe(srv, o.web, logger) }()

	var watchers sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(ctx)
	if o.checkInterval > 0 {
		watchers.Go(func() { d.Watch(watchCtx, o.checkInterval) })
	}
	watchers.Go(func() { ret.Run(watchCtx, memreturn.DefaultEvery) })
	code := runonce.ExitOK
loop:
	for {
		select {
		case <-hup:
			logger.Info("SIGHUP: reloading the configuration")
			_ = d.Reload()
		case err := <-served:
			if !errors.Is(err, http.ErrServerClosed) {
				logger.Error("the web server stopped", "err", err)
				code = runonce.ExitRuntime
			}
			break loop
		case <-ctx.Done():
			logger.Info("shutting down: stopping schedules, cancelling runs in progress, flushing metrics")
			break loop
		}
	}
	stopWatch()
	watchers.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := d.Shutdown(sctx); err != nil {
		logger.Error("shutdown", "err", err)
		code = runonce.ExitRuntime
	}
	if err := srv.Shutdown(sctx); err != nil && code == runonce.ExitOK {
		logger.Error("web server shutdown", "err", err)
		code = runonce.ExitRuntime
	}
	logger.Info("stopped")
	return code
}
