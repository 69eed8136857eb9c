package memory_test

import (
	"testing"

	"svc.dev/services/identity/internal/adapters/adaptertest"
	"svc.dev/services/identity/internal/adapters/memory"
	"svc.dev/services/identity/internal/app/port"
)

func TestStoreContract(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, func(_ *testing.T, c port.Ceilings) port.Repositories { return memory.NewStore(c).Repositories() })
}
