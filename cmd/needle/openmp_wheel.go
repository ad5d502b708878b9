//go:build wheel

package main

import "os"

// The wheel's OpenMP runtime is LLVM's libomp, whose idle threads spin for 200 ms after each
// parallel region where GNU's libgomp (the developers' build) soon sleeps: on a busy machine
// those spins take the cores the next batch needs. KMP_BLOCKTIME=0 makes them sleep at once,
// unless the user chose a value; libomp reads it at its first parallel region, after this.
func init() {
	if _, set := os.LookupEnv("KMP_BLOCKTIME"); !set {
		os.Setenv("KMP_BLOCKTIME", "0")
	}
}
