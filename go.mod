module github.com/tokenprobe/tokenprobe

go 1.26.7

require (
	go.uber.org/goleak v1.3.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/alecthomas/kingpin/v2 v2.4.0 // indirect
	github.com/alecthomas/units v0.0.0-20240927000941-0f3dac36c52b // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/prometheus/common v0.73.1 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/xhit/go-str2duration/v2 v2.1.0 // indirect
)
