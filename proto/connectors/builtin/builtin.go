// Package builtin lists the built-in connectors. Each is a folder here: its catalog entry (a
// JSON file per block type, which the connectors package embeds) beside its Runtime. Adding
// one is a new folder and a line in All; TestEveryConnectorIsWhole fails on a half-registered
// one.
package builtin

import (
	"svc.dev/proto/connectors"
	"svc.dev/proto/connectors/builtin/condition"
	"svc.dev/proto/connectors/builtin/fail"
	"svc.dev/proto/connectors/builtin/httprequest"
	"svc.dev/proto/connectors/builtin/jsonvalidate"
	"svc.dev/proto/connectors/builtin/log"
	"svc.dev/proto/connectors/builtin/transform"
	"svc.dev/proto/connectors/builtin/trigger"
	"svc.dev/proto/connectors/builtin/wait"
)

// All is every built-in connector's Runtime.
func All() []connectors.Runtime {
	return append(trigger.Runtimes(),
		transform.Runtime(),
		log.Runtime(),
		condition.Runtime(),
		fail.Runtime(),
		wait.Runtime(),
		httprequest.Runtime(),
		jsonvalidate.Runtime(),
	)
}
