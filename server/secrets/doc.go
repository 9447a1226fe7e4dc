// Package secrets keeps secrets out of orchestra's logs. [Of] lists the
// values of a configuration that must never be written (tokens, API keys,
// the environments, headers and URL credentials of downstream servers, and
// the environment variables whose names say they are secret); [NewHandler]
// wraps a slog.Handler so that none of them, and no "Bearer ..." or
// "Basic ..." credential, reaches it; [Redact] does the same to one
// string.
//
//	log := slog.New(secrets.NewHandler(slog.NewTextHandler(os.Stderr, nil), secrets.Of(cfg)))
package secrets
