package build

import (
	"context"
	"fmt"
	"os"

	"github.com/drover-os/drover/agent/nodeconfig"
)

// credentialProvider is one of the kubelet image credential providers a
// recipe's credentialProviders may name: drover's program and where the
// kubelet finds it (the agent configures the kubelet to use it when it is
// there).
type credentialProvider struct{ pkg, dst string }

var credentialProviders = map[string]credentialProvider{
	"acr": {pkg: "./cmd/drover-acr-credential-provider", dst: nodeconfig.ACRProviderPath},
}

// credentialProviderBinaries builds the recipe's credential providers from
// the checkout with the lock's toolchain, as drover-agent (also when
// --agent and --init are given: those replace the agent and init only),
// or takes the files Options.ProviderBins gives. They go into the image
// with drover's own binaries and into the manifest's list of them, and
// so into the SBOMs and the provenance.
func (b *builder) credentialProviderBinaries(ctx context.Context) error {
	for _, name := range b.p.Recipe.CredentialProviders {
		cp, ok := credentialProviders[name]
		if !ok {
			return fmt.Errorf("%s: credentialProviders names %q, which drover does not ship", b.p.Recipe.Path, name)
		}
		ob := &ownBinary{pkg: cp.pkg, dst: cp.dst}
		var how OwnSource
		if given, ok := b.o.ProviderBins[name]; ok {
			data, err := os.ReadFile(given)
			if err != nil {
				return fmt.Errorf("the %s credential provider: %w", name, err)
			}
			ob.data, how = data, OwnSource{Built: "override", From: given}
		} else {
			var err error
			if ob.data, how, err = b.buildOwn(ctx, cp.pkg, cp.dst, b.arch.GOARCH); err != nil {
				return fmt.Errorf("the %s credential provider: %w", name, err)
			}
		}
		b.man.addOwn(cp.dst, ob.data, how)
		b.own = append(b.own, ob)
	}
	return nil
}
