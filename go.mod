module github.com/redlock-dev/redlock

go 1.26.8

require (
	github.com/HdrHistogram/hdrhistogram-go v1.1.2
	github.com/alicebob/miniredis/v2 v2.35.0
	github.com/go-redsync/redsync/v4 v4.13.0
	github.com/panjf2000/ants/v2 v2.11.3
	github.com/redis/go-redis/v9 v9.7.0
	github.com/redis/rueidis v1.0.79
	github.com/valyala/bytebufferpool v1.0.0
	golang.org/x/sync v0.24.0
)

require github.com/anishathalye/porcupine v1.3.1

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.23.2
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.66.1 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/sys v0.47.0
	google.golang.org/protobuf v1.36.8 // indirect
)

require (
	github.com/bsm/redislock v0.9.4
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/google/pprof v0.0.0-20260906184651-6331bc6350fe
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/redis/rueidis/rueidiscompat v1.0.79 // indirect
	github.com/tidwall/btree v1.1.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/redcon v1.6.2
	github.com/yuin/gopher-lua v1.1.1 // indirect
)
