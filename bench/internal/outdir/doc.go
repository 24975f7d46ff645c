// Package outdir finds where kvroute's benchmark commands (routesim, gwload,
// renderload, report) write and read their files: the module root, found
// by walking up from the working directory to kvroute's go.mod, and an
// output directory under it when no -out flag names one. The repository
// ignores out/, so a run with the default never dirties the checkout.
package outdir
