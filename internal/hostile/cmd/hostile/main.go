// Command hostile serves internal/hostile's misbehaving endpoint on a
// port, for the reproductions in docs/RELIABILITY.md: the first path
// segment of a base URL picks the behaviour, as in
// http://127.0.0.1:18300/many-chunks/v1.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tokenprobe/tokenprobe/internal/hostile"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18300", "address to serve on")
	flag.Parse()
	s, err := hostile.Listen(*listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
	fmt.Printf("hostile endpoint on http://%s/BEHAVIOUR/v1\n", s.Addr())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	_ = s.Close()
}
