package app

import "context"

// StreamSlots caps the run event streams one principal holds open across every gateway
// replica: a stream takes a slot while it is open.
type StreamSlots interface {
	// Take takes one of key's max slots for as long as ctx lives, and gives it back when ctx
	// ends; ok is false when all max are taken. An error means the slots could not be
	// counted (the caller then counts on this replica alone).
	Take(ctx context.Context, key string, max int) (ok bool, err error)
}
