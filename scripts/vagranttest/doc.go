// Package vagranttest checks the repository's Vagrantfile with `vagrant
// validate` and a recording stand-in for Vagrant's configuration API, and the
// box's provision script with bash -n and shellcheck. The tests carry the
// integration build tag; the package has no code of its own.
package vagranttest
