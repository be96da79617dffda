// Package publishtest checks scripts/publish-ecs.sh against golden command
// lines and fake aliyun and ossutil tools. The tests need bash and jq and
// carry the integration build tag; the package has no code of its own.
package publishtest
