package debian

import (
	"bytes"
	"fmt"
	"os"

	"github.com/ProtonMail/go-crypto/openpgp"
)

// LoadKeyring reads an OpenPGP keyring in binary (.gpg, .pgp) or ASCII-armored
// (.asc) form. It uses ProtonMail's go-crypto because Debian signs recent
// releases with Ed25519 keys, which x/crypto/openpgp cannot read.
func LoadKeyring(path string) (openpgp.EntityList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading keyring %s: %w (check the keyring path)", path, err)
	}
	keys, err := ParseKeyring(data)
	if err != nil {
		return nil, fmt.Errorf("reading keyring %s: %w", path, err)
	}
	return keys, nil
}

// ParseKeyring is LoadKeyring on bytes already read.
func ParseKeyring(data []byte) (openpgp.EntityList, error) {
	var (
		keys openpgp.EntityList
		err  error
	)
	if bytes.Contains(data[:min(len(data), 1024)], []byte("-----BEGIN PGP")) {
		keys, err = openpgp.ReadArmoredKeyRing(bytes.NewReader(data))
	} else {
		keys, err = openpgp.ReadKeyRing(bytes.NewReader(data))
	}
	if err != nil {
		return nil, fmt.Errorf("parsing OpenPGP keys: %w", err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("parsing OpenPGP keys: no usable key found")
	}
	return keys, nil
}
