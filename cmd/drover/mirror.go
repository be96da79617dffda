package main

import "github.com/spf13/cobra"

// newMirrorCmd prints the Debian mirror drover would use (for scripts such
// as the benchmark's peer pipeline).
func newMirrorCmd(g *globals) *cobra.Command {
	var security bool
	cmd := &cobra.Command{
		Use:   "mirror",
		Short: "Print the Debian archive root drover uses (--mirror, else $DROVER_MIRROR, else apt's sources)",
		Long: `mirror prints the Debian archive root drover fetches from: --mirror, else
$DROVER_MIRROR, else the first Debian entry of the build host's apt sources.
With --security, the security archive's root instead (where the -security
suites are): --security-mirror, else $DROVER_SECURITY_MIRROR, else apt's
first -security entry.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := g.options(true)
			if err != nil {
				return err
			}
			m := o.Mirror
			if security {
				if o.SecurityMirrorErr != nil {
					return o.SecurityMirrorErr
				}
				m = o.SecurityMirror
			}
			_, err = cmd.OutOrStdout().Write([]byte(m + "\n"))
			return err
		},
	}
	cmd.Flags().BoolVar(&security, "security", false, "print the security archive's root")
	return cmd
}
