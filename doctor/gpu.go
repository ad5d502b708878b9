package doctor

import (
	"fmt"

	"needle/cuda"
)

// gpu reports the CUDA driver, the devices and cuBLAS, or why there are none (package cuda's
// own discovery: the same libraries and paths `needle serve --gpu` would use). needed makes
// their absence Missing.
func gpu(needed bool) []Check {
	absent := Info
	if needed {
		absent = Missing
	}
	n, err := cuda.Count()
	if err == nil && n == 0 {
		err = fmt.Errorf("the driver sees no device (CUDA_VISIBLE_DEVICES?)")
	}
	if err != nil {
		return []Check{{Name: "gpu", Status: absent, Value: "none", Why: err.Error() + "; the CPU serves"}}
	}
	var out []Check
	version, _ := cuda.DriverVersion()
	for i := range n {
		c := Check{Name: fmt.Sprintf("gpu %d", i), Status: OK}
		dev, err := cuda.Open(i)
		if err != nil {
			c.Status, c.Value = absent, err.Error()
			out = append(out, c)
			continue
		}
		free, total, err := dev.MemInfo()
		c.Value = fmt.Sprintf("%s, %.1f of %.1f GiB free, driver for CUDA %d.%d", dev.Name(), float64(free)/(1<<30), float64(total)/(1<<30), version/1000, version%1000/10)
		if err != nil {
			c.Status, c.Why = Warn, err.Error()
		}
		dev.Close()
		out = append(out, c)
	}
	path, err := cuda.CublasPath()
	if err != nil {
		return append(out, Check{Name: "cublas", Status: absent, Value: "none", Why: err.Error() + "; the GPU index and encoder need it"})
	}
	return append(out, Check{Name: "cublas", Status: OK, Value: path})
}
