package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/nodeconfig"
)

// TestCredentialProvidersFollowTheRecipe: the recipe's credentialProviders
// go into the image with drover's own binaries (installed by addFiles)
// and into the manifest's list of them; a recipe without any ships none.
func TestCredentialProvidersFollowTheRecipe(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "acr")
	os.WriteFile(bin, []byte("provider bytes"), 0o755)

	b := ownBuilder(t, "go1.26.8", Options{ProviderBins: map[string]string{"acr": bin}})
	if err := b.credentialProviderBinaries(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(b.own) != 0 || len(b.man.Own) != 0 {
		t.Errorf("a recipe without credentialProviders ships %+v", b.man.Own)
	}

	b.p.Recipe.CredentialProviders = []string{"acr"}
	if err := b.credentialProviderBinaries(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(b.own) != 1 || b.own[0].dst != nodeconfig.ACRProviderPath || string(b.own[0].data) != "provider bytes" {
		t.Errorf("own binaries %+v", b.own)
	}
	if len(b.man.Own) != 1 || b.man.Own[0].Path != nodeconfig.ACRProviderPath || b.man.Own[0].SHA256 != sha([]byte("provider bytes")) ||
		b.man.Own[0].Built != "override" {
		t.Errorf("manifest %+v", b.man.Own)
	}

	b = ownBuilder(t, "go1.26.8", Options{})
	b.p.Recipe.CredentialProviders = []string{"acr"}
	err := b.credentialProviderBinaries(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "the acr credential provider: no checkout of github.com/drover-os/drover to build") ||
		!strings.Contains(err.Error(), "(./cmd/drover-acr-credential-provider) from: run drover from its checkout") {
		t.Errorf("no checkout: %v", err)
	}
}
