package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/userdata"
)

func newValidateCmd() *cobra.Command {
	var offline, asJSON, allowPrivate bool
	cmd := &cobra.Command{
		Use:   "validate USERDATA",
		Short: "Check an Ignition user-data exactly as drover-agent will on the node",
		Long: `validate runs the agent's own parse, policy and node-file checks on a
user-data file (Ignition JSON, raw or gzip-compressed once) and touches nothing. Every problem is
printed with its JSON path. Exit status 0 means the node would accept it, 1 that
it would refuse it — so a pipeline can reject bad user-data before it reaches a
launch template — and 2 that nothing was checked (a file that cannot be read, a
missing argument, an unknown flag).

http(s) contents are fetched to check their verification hash, with the
agent's client: no proxy from the environment, at most 3 redirects, bounded
sizes and times. The user-data may not be yours to trust, so validate connects
only to public addresses, judged on the address each connection (redirects
included) is made to, whatever name the URL gives: never loopback, link-local
(169.254.0.0/16, fe80::/10) or the ECS metadata service 100.100.100.200, and
private addresses (RFC 1918, 100.64.0.0/10, fc00::/7) only with
--allow-private-sources — give it when the config's URLs are meant to name
servers inside your VPC (the node fetches from those) and you trust it not to
point this host at its own internal services. --offline fetches nothing
(everything else is still checked).`,
		Example: `  drover validate userdata.ign
  drover userdata --server https://10.0.0.1:6443 --ca-file ca.crt --token abcdef.0123456789abcdef > ud.ign && drover validate ud.ign`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			var f ignition.Fetcher
			if !offline {
				client := ignition.RemoteClientFor(ignition.Destinations{AllowPrivate: allowPrivate, Flag: "--allow-private-sources"})
				client.Timeout = 30 * time.Second
				f = &ignition.HTTPFetcher{Client: client}
			}
			problems := ignition.Validate(data, agent.Options(f))
			out := cmd.OutOrStdout()
			if asJSON {
				type jp struct {
					Path    string `json:"path"`
					Message string `json:"message"`
				}
				res := struct {
					OK       bool `json:"ok"`
					Problems []jp `json:"problems"`
				}{OK: len(problems) == 0, Problems: []jp{}}
				for _, p := range problems {
					res.Problems = append(res.Problems, jp{p.Path, p.Message})
				}
				b, _ := json.MarshalIndent(res, "", "  ")
				fmt.Fprintln(out, string(b))
			} else {
				for _, p := range problems {
					fmt.Fprintln(out, p.String())
				}
				if len(problems) == 0 {
					fmt.Fprintf(out, "%s: ok, the node would accept it\n", args[0])
				}
			}
			if len(problems) > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&offline, "offline", false, "do not fetch http(s) contents to check their hashes")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the verdict as JSON")
	cmd.Flags().BoolVar(&allowPrivate, "allow-private-sources", false, "fetch http(s) contents from private addresses too (RFC 1918, 100.64.0.0/10, fc00::/7), as the node does; never loopback, link-local or the metadata service")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	return cmd
}

func newUserdataCmd() *cobra.Command {
	var s userdata.Spec
	var from string
	var b64 bool
	var labels, mirrors []string
	cmd := &cobra.Command{
		Use:   "userdata",
		Short: "Render the Ignition user-data for a launch template (node file inside)",
		Long: `userdata renders the Ignition config that a scaling group's launch template
passes as UserData: it writes the node file /etc/drover/node.yaml (see
docs/node-config.md) from flags or a small YAML file, and checks the result with
the agent's own code. --base64 prints it ready for the ECS API's UserData.

The YAML file takes the same settings as the flags:
  server, caFile | caData | caHash, bootstrapToken, labels, taints, mirrors,
  sandboxImage, maxPods, clusterDNS, clusterDomain
(a relative caFile is relative to the YAML file), kubeletConfig: a mapping
of KubeletConfiguration fields written to the node file's kubelet.config, and
acr: the node file's registries.acr (regions, instances, apiEndpoint).`,
		Example: `  drover userdata --server https://10.0.0.10:6443 --ca-file ca.crt --token abcdef.0123456789abcdef \
      --label example.com/pool=workers --taint dedicated=batch:NoSchedule \
      --mirror docker.io=https://mirror.example.com --base64
  drover userdata --from pool.yaml > userdata.ign`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := s
			if from != "" {
				f, err := userdata.Load(from)
				if err != nil {
					return err
				}
				// A path in the file is relative to the file, not to
				// wherever drover runs.
				if f.CAFile != "" && !filepath.IsAbs(f.CAFile) {
					f.CAFile = filepath.Join(filepath.Dir(from), f.CAFile)
				}
				spec = mergeSpec(*f, s, cmd)
			}
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok {
					return fmt.Errorf("--label %q: want key=value", l)
				}
				if spec.Labels == nil {
					spec.Labels = map[string]string{}
				}
				spec.Labels[k] = v
			}
			for _, m := range mirrors {
				reg, url, ok := strings.Cut(m, "=")
				if !ok {
					return fmt.Errorf("--mirror %q: want registry=URL", m)
				}
				if spec.Mirrors == nil {
					spec.Mirrors = map[string][]string{}
				}
				spec.Mirrors[reg] = append(spec.Mirrors[reg], url)
			}
			out, err := userdata.Render(&spec)
			if err != nil {
				return err
			}
			if b64 {
				fmt.Fprintln(cmd.OutOrStdout(), base64.StdEncoding.EncodeToString(out))
				return nil
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "read the settings from a YAML file (flags given as well win)")
	f.StringVar(&s.Server, "server", "", "API server URL (https)")
	f.StringVar(&s.CAFile, "ca-file", "", "cluster CA certificate (PEM) to embed")
	f.StringVar(&s.CAHash, "ca-hash", "", "pin the cluster CA as sha256:<hex of its SPKI> instead of embedding it")
	f.StringVar(&s.BootstrapToken, "token", "", "bootstrap token <id>.<secret>")
	f.StringArrayVar(&labels, "label", nil, "node label key=value (repeatable)")
	f.StringArrayVar(&s.Taints, "taint", nil, "node taint key[=value]:Effect (repeatable)")
	f.StringArrayVar(&mirrors, "mirror", nil, "containerd registry mirror registry=URL (repeatable)")
	f.StringVar(&s.SandboxImage, "sandbox-image", "", "pause image for containerd")
	f.IntVar(&s.MaxPods, "max-pods", 0, "kubelet maxPods")
	f.StringArrayVar(&s.ClusterDNS, "cluster-dns", nil, "cluster DNS service IP (repeatable)")
	f.StringVar(&s.ClusterDomain, "cluster-domain", "", "cluster domain")
	f.BoolVar(&b64, "base64", false, "print base64, as the ECS API's UserData wants")
	return cmd
}

// mergeSpec lays flags the user set over the file's settings.
func mergeSpec(file, flags userdata.Spec, cmd *cobra.Command) userdata.Spec {
	set := func(name string) bool { return cmd.Flags().Changed(name) }
	if set("server") {
		file.Server = flags.Server
	}
	if set("ca-file") {
		file.CAFile = flags.CAFile
	}
	if set("ca-hash") {
		file.CAHash = flags.CAHash
	}
	if set("token") {
		file.BootstrapToken = flags.BootstrapToken
	}
	if set("taint") {
		file.Taints = flags.Taints
	}
	if set("sandbox-image") {
		file.SandboxImage = flags.SandboxImage
	}
	if set("max-pods") {
		file.MaxPods = flags.MaxPods
	}
	if set("cluster-dns") {
		file.ClusterDNS = flags.ClusterDNS
	}
	if set("cluster-domain") {
		file.ClusterDomain = flags.ClusterDomain
	}
	return file
}
