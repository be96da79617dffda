package main

import "github.com/spf13/cobra"

// newMirrorCmd prints the Debian mirror drover would use (for scripts such
// as the benchmark's peer pipeline).
func newMirrorCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "mirror",
		Short: "Print the Debian archive root drover uses (--mirror, else $DROVER_MIRROR, else apt's sources)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := g.options(true)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write([]byte(o.Mirror + "\n"))
			return err
		},
	}
}
