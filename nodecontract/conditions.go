package nodecontract

// The Node conditions the agent owns that say the node needs replacing,
// each True while its evidence holds (docs/agent.md "Health" and the drift
// guard): a file system the kernel remounted read-only, a local change to
// what the image and user-data guarantee, a NIC without carrier, and
// containerd or the kubelet restarted by systemd again and again (the
// node-problem-detector's type names, so a rule written for those works
// unchanged). drover rollout --repair replaces a node with one True.
const (
	ConditionReadonlyFilesystem        = "ReadonlyFilesystem"
	ConditionConfigDrift               = "DroverConfigDrift"
	ConditionNICLinkDown               = "NICLinkDown"
	ConditionFrequentContainerdRestart = "FrequentContainerdRestart"
	ConditionFrequentKubeletRestart    = "FrequentKubeletRestart"
)

// UnhealthyConditions lists them, a new slice each call.
func UnhealthyConditions() []string {
	return []string{ConditionReadonlyFilesystem, ConditionConfigDrift, ConditionNICLinkDown,
		ConditionFrequentContainerdRestart, ConditionFrequentKubeletRestart}
}
