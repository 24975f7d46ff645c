// Package cliflag gives kvroute's commands one command-line behaviour: --help
// prints the usage to standard output and exits 0; a bad flag is one line
// on standard error (a duration without a unit says to add one) instead of
// the flag package's error followed by the whole usage; an error is printed
// once with the command's name in front, never twice.
package cliflag
