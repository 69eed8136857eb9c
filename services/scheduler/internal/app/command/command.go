// Package command holds the use cases that change schedules and fire them.
package command
