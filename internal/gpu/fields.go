// Package gpu puts NVIDIA DCGM GPU series on tokenprobe's /metrics with
// exactly the names, help texts and labels of NVIDIA dcgm-exporter, so one
// dashboard serves whether the series come from tokenprobe or from a
// dcgm-exporter next to the model server. GPUs are optional: where DCGM is
// missing the source reports itself down and nothing else changes.
package gpu

// Field is one DCGM field as dcgm-exporter exports it.
type Field struct {
	ID   uint16
	Name string // the dcgm-exporter series name
	Type string // gauge or counter
	Help string
}

// Fields is every field tokenprobe knows, in dcgm-exporter's words (its
// default-counters.csv). IDs are DCGM's (dcgm_fields.h).
var Fields = []Field{
	{100, "DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."},
	{101, "DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."},
	{150, "DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."},
	{155, "DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."},
	{156, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."},
	{203, "DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."},
	{204, "DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."},
	{251, "DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."},
	{252, "DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."},
	{230, "DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."},
	{240, "DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in us)."},
	{241, "DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in us)."},
	{1002, "DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned (in %)."},
	{1004, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active (in %)."},
	{1005, "DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active sending or receiving data (in %)."},
}

// Labels are dcgm-exporter's labels on every GPU series.
var Labels = []string{"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"}

// ByName finds a field by its series name.
func ByName(name string) (Field, bool) {
	for _, f := range Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}
