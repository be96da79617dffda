package main

import (
	"io"
	"net"
	"os"

	"github.com/spf13/cobra"
)

// newRelayCmd is the per-connection helper QEMU's guestfwd runs (cmd:
// drover relay ADDR): it joins its stdin/stdout to a TCP connection, so a
// guest connection to the ECS metadata address reaches the emulator on the
// host.
func newRelayCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "relay ADDR",
		Short:  "Join stdin/stdout to a TCP address (used by QEMU guestfwd)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := net.Dial("tcp", args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(c, os.Stdin); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
			go func() { io.Copy(os.Stdout, c); done <- struct{}{} }()
			<-done
			<-done
			return nil
		},
	}
}
