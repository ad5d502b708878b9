module needle

go 1.26.8

require (
	github.com/DataIntelligenceCrew/go-faiss v0.2.0 // indirect
	github.com/andybalholm/brotli v1.1.1 // indirect
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/klauspost/cpuid/v2 v2.4.2 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasthttp v1.60.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
