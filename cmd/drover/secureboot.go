package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/drover-os/drover/image/authenticode"
)

// secureBootFlags are drover build's Secure Boot signing flags.
type secureBootFlags struct {
	key, cert string
	enroll    bool
}

func (f *secureBootFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.key, "secure-boot-key", "", "sign systemd-boot and the UKI for UEFI Secure Boot with this unencrypted RSA key (PEM; needs --secure-boot-cert)")
	cmd.Flags().StringVar(&f.cert, "secure-boot-cert", "", "certificate (PEM) of --secure-boot-key; the firmware's db must hold it or its issuer")
	cmd.Flags().BoolVar(&f.enroll, "secure-boot-enroll", false, "also put the certificate on the ESP as PK, KEK and db (loader/keys/auto/*.auth) for systemd-boot to enrol when the firmware is in setup mode")
}

// signer loads the key pair, or returns nil when no signing was asked for.
func (f *secureBootFlags) signer() (*authenticode.Signer, error) {
	if f.key == "" && f.cert == "" {
		if f.enroll {
			return nil, errors.New("--secure-boot-enroll needs --secure-boot-key and --secure-boot-cert: the keys it enrols are the signing pair")
		}
		return nil, nil
	}
	if f.key == "" || f.cert == "" {
		return nil, errors.New("--secure-boot-key and --secure-boot-cert go together: give both, or neither for an unsigned image")
	}
	key, err := os.ReadFile(f.key)
	if err != nil {
		return nil, fmt.Errorf("--secure-boot-key: %w", err)
	}
	cert, err := os.ReadFile(f.cert)
	if err != nil {
		return nil, fmt.Errorf("--secure-boot-cert: %w", err)
	}
	s, err := authenticode.ParseSigner(key, cert)
	if err != nil {
		return nil, fmt.Errorf("--secure-boot-key %s / --secure-boot-cert %s: %w", f.key, f.cert, err)
	}
	return s, nil
}
