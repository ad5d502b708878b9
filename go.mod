module needle

go 1.26.8

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/ebitengine/purego v0.11.3
	github.com/klauspost/compress v1.20.3
	github.com/valyala/fasthttp v1.60.0
	golang.org/x/sys v0.49.0
	golang.org/x/text v0.43.0
)

require (
	github.com/andybalholm/brotli v1.1.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
)
