// Package cli is orchestra's command line: each command in a file of its
// own (serve.go, run.go, ...), the one list of commands in cli.go, and the
// flags and helpers they share in flags.go. The README's CLI reference is
// generated from [Commands] and each command's -h.
//
//	os.Exit(cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
package cli
