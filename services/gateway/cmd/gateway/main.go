// Command gateway is the public entry point: it authenticates every guarded request through
// identity and forwards it, signed, to the service that owns the route.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"svc.dev/libs/telemetry"
	"svc.dev/services/gateway/internal/service"
)

func main() {
	level := new(slog.LevelVar)
	log := telemetry.NewLogger(os.Stdout, "gateway", level)
	if err := run(context.Background(), log, level); err != nil {
		log.Error("stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, level *slog.LevelVar) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, err := service.LoadConfig(os.LookupEnv)
	if err != nil {
		return err
	}
	level.Set(cfg.Base.LogLevel)

	app, err := service.NewApplication(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer app.Close()
	return app.Run(ctx)
}
