package check

import (
	"context"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// LoadCompose loads a compose file with the Compose specification's own loader: schema
// validation, interpolation (against env only, not this machine's environment), merge keys,
// normalization and the consistency checks (depends_on and volumes that exist, ...).
func LoadCompose(ctx context.Context, file string, env map[string]string) (*types.Project, error) {
	details, err := loader.LoadConfigFiles(ctx, []string{file}, filepath.Dir(file))
	if err != nil {
		return nil, err
	}
	details.Environment = env
	return loader.LoadWithContext(ctx, *details, func(o *loader.Options) {
		o.ResolvePaths = true
	})
}
