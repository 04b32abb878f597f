package admission

import (
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Info is the controller as it stands: what it measures, what it holds
// to, what it would admit now and what it refused (execapi.Info's
// Admission, /metrics).
func (c *Controller) Info() execapi.AdmissionInfo {
	c.refresh()
	c.mu.Lock()
	defer c.mu.Unlock()
	i := execapi.AdmissionInfo{
		Running: len(c.running), Starting: c.starting, CPUBound: c.cpuBound, Waiting: c.queue.len(),
		Capacity: c.s.Capacity, MaxQueue: c.s.MaxQueue, QueueWaitMS: max(c.s.QueueWait, 0).Milliseconds(),
		Rejections: map[execapi.RefusalReason]int64{},
	}
	free := c.s.Capacity - len(c.running)
	if c.memoryOn() {
		i.MemoryBudgetBytes, i.CallFloorBytes = c.s.MemoryBudget, c.s.CallFloor
		i.MemoryUsedBytes = c.gauges.memory
		i.MemoryReservedBytes = c.reservedLocked()
		free = min(free, int((c.s.MemoryBudget-i.MemoryReservedBytes)/c.s.CallFloor))
	}
	if c.cpuOn() {
		i.CPUThreshold, i.CPUGauge = c.s.CPUThreshold, c.g.CPUKind
		i.CPUPressure = c.gauges.pressure
		if i.CPUPressure >= c.s.CPUThreshold {
			free = 0
		}
	}
	i.Free = max(free-c.queue.len(), 0)
	for _, r := range execapi.AdmissionRefusals {
		i.Rejections[r] = c.rejections[r]
	}
	return i
}
