module github.com/tokenprobe/tokenprobe

go 1.26.7

require (
	go.uber.org/goleak v1.3.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/kr/text v0.2.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
)
