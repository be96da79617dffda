package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-os/drover/cloud/aliyun"
	"github.com/drover-os/drover/cloud/event"
	"github.com/drover-os/drover/image/verify"
	"github.com/drover-os/drover/publish"
)

func newPublishCmd() *cobra.Command {
	var (
		req                      publish.Request
		manifestPath, pubKey     string
		ecsEndpoint, ossEndpoint string
		checkProvenance          bool
		dryRun, asJSON           bool
		partSize                 int64
		checkpointDir            string
		keepObject               bool
	)
	cmd := &cobra.Command{
		Use:   "publish IMAGE",
		Short: "Verify an image, upload it to OSS and import it as an ECS custom image",
		Long: `publish makes a built image an ECS custom image, in --region and every
--copy-to region, and prints their image IDs.

It first runs drover verify's checks on IMAGE against its manifest
(<name>.manifest.json beside it) and refuses an image that does not match,
before any network call. A qcow2 is checked by its digest, which needs the
signed provenance: pass --provenance --pub KEY.pub, or publish the .raw.
An image with cached images on a cache disk has <name>.images.raw beside
it; its size and sha256 must be the manifest's too.

Then it looks for an image of the build: one in the region tagged
drover:build-id=<the manifest's buildID>. An Available one is reused (no
upload, no import); one still being imported or copied (an earlier run that
was interrupted) is waited for. Otherwise it uploads IMAGE to
oss://BUCKET/PREFIX<image name>.<ext> (multipart; an upload that was
interrupted resumes from the parts OSS holds, by the checkpoint in
--checkpoint-dir; the object's CRC-64 must then be the file's), calls
ImportImage with
BootMode UEFI, OSType linux, Platform, Architecture from the manifest (x86_64
or arm64), the format from the file name, DiskImageSize = the manifest's
diskSize rounded up to GiB, Features.NvmeSupport=supported,
Features.ImdsSupport=v2 and the tags drover:root-hash, drover:build-id,
drover:name, drover:version (drover:secure-boot=signed with --secure-boot),
and waits until the image is Available; then it deletes the object (ECS
keeps its own copy; --keep-object keeps it). Each --copy-to region gets a
CopyImage, tagged the same way and waited for. Running it again is safe.

The cache disk, when there is one, is uploaded beside the image (to
<image name>.images.raw) and imported with it as its data disk
(DiskDeviceMapping.2, RAW, its size rounded up to GiB): ECS keeps it as a
snapshot of the image, and every instance created from the image, by a
launch template or a scaling group, gets it as a data disk with nothing
in the template; the agent finds it by label and UUID. So a new cache is
a new image (and a rollout). A launch template DataDisk naming that
snapshot (DescribeImages, DiskDeviceMappings, Type data) attaches it to
instances of another image too. Both objects are deleted after import.

stdout carries only the result: the image ID in --region on the first line,
then "REGION IMAGEID" per copy; progress goes to stderr. With --json,
stdout carries one JSON object per line, the same events as drover rollout
--json prints (docs/events.md): the progress, then a last "done" event whose
result is {imageName, buildID, rootHash, images: [{region, imageId, action}]}
where action is create, reuse or wait (with --dry-run, a last "plan").
--dry-run prints the plan, after looking up the existing images
(read-only), and writes nothing.

Credentials come from the standard Alibaba Cloud chain: the environment
(ALIBABA_CLOUD_ACCESS_KEY_ID, ALIBABA_CLOUD_ACCESS_KEY_SECRET,
ALIBABA_CLOUD_SECURITY_TOKEN), the aliyun CLI's ~/.aliyun/config.json
profile, or the ECS RAM role of the instance it runs on. The permissions
it needs are in docs/ecs.md.

Exit status: 0 when every region has the image, 1 when the image does not
verify or publishing failed, 2 on usage errors.`,
		Example: `  drover publish --region cn-hangzhou --bucket my-images out/ecs-node.raw
  drover publish --region cn-hangzhou --bucket my-images --copy-to cn-shanghai,cn-beijing out/ecs-node.raw
  drover publish --region cn-hangzhou --bucket my-images --provenance --pub release.pub out/ecs-node.qcow2
  drover publish --dry-run --region cn-hangzhou --bucket my-images out/ecs-node.raw`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			req.Image = args[0]
			if _, err := os.Stat(req.Image); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("reading image %s: %w: build it first (drover build) and pass the image file it wrote", req.Image, err)}
			}
			if manifestPath == "" {
				manifestPath = beside(req.Image)
			}
			m, pub, err := verifyInputs(manifestPath, checkProvenance, pubKey)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			req.Manifest = m
			plan, err := publish.NewPlan(req)
			if err != nil {
				var ue *publish.UsageError
				if errors.As(err, &ue) {
					return &exitError{code: 2, err: err}
				}
				return err
			}

			if f, err := verify.Format(req.Image); err == nil && f == verify.FormatQCOW2 && pub == nil {
				return &exitError{code: 2, err: fmt.Errorf("%s is a qcow2 image, which drover verify checks only by its digest against the signed provenance: "+
					"pass --provenance --pub KEY.pub, or publish the .raw image beside it", req.Image)}
			}
			log := newPublishLog(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON)
			// The image is checked before anything talks to a cloud.
			r, err := checkImage(ctx, req.Image, manifestPath, m, pub, verify.Expect{})
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if len(r.problems) > 0 {
				for _, p := range r.problems {
					log.event(publish.Event{Kind: "verify", Message: p.String()})
				}
				return &exitError{code: 1, err: fmt.Errorf("refusing to publish %s: it does not match %s (%d problems: %s); re-copy it from the build output or rebuild it",
					req.Image, manifestPath, len(r.problems), strings.Join(problemParts(r), ", "))}
			}
			var ok strings.Builder
			verifyText(&ok, r)
			log.event(publish.Event{Kind: "verify", Message: strings.TrimSpace(strings.SplitN(ok.String(), "\n", 2)[0])})

			clients, err := aliyun.New(aliyun.Options{Region: plan.Region, ECSEndpoint: ecsEndpoint, OSSEndpoint: ossEndpoint})
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if checkpointDir == "" {
				cache, err := os.UserCacheDir()
				if err != nil {
					return &exitError{code: 2, err: fmt.Errorf("no cache directory for the upload checkpoint (%w): pass --checkpoint-dir", err)}
				}
				checkpointDir = filepath.Join(cache, "drover", "upload")
			}
			pb := &publish.Publisher{Clients: clients, Events: log.event, PartSize: partSize, CheckpointDir: checkpointDir, KeepObject: keepObject}
			out := cmd.OutOrStdout()
			if dryRun {
				decisions, err := pb.Lookup(ctx, plan)
				if err != nil {
					// The plan is still worth printing: say what it
					// could not know.
					log.event(publish.Event{Kind: "lookup", Message: "existing images not looked up: " + err.Error()})
				}
				return writePlan(out, log, plan, decisions)
			}
			res, err := pb.Publish(ctx, plan)
			if err != nil {
				return err
			}
			if err := writeResult(out, log, res); err != nil {
				return fmt.Errorf("writing the result: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Region, "region", "", "region of the bucket and of the imported image (e.g. cn-hangzhou)")
	f.StringVar(&req.Bucket, "bucket", "", "OSS bucket in --region to upload the image to")
	f.StringVar(&req.ObjectPrefix, "object-prefix", "drover/", "object key prefix in the bucket")
	f.StringVar(&req.ImageName, "image-name", "", "ECS image name (default <name>-<version>-<buildID> from the manifest)")
	f.StringSliceVar(&req.CopyTo, "copy-to", nil, "copy the image to these regions too (REGION,REGION…), tagged the same way")
	f.StringVar(&req.Platform, "platform", "Debian", "ECS Platform of the image")
	f.StringVar(&req.Architecture, "architecture", "", "x86_64 or arm64; must agree with the manifest's arch (default: the manifest's)")
	f.BoolVar(&req.SecureBoot, "secure-boot", false, "the image was built with --secure-boot-key: check that the manifest lists both boot binaries as signed and tag the image drover:secure-boot=signed")
	f.DurationVar(&req.WaitTimeout, "wait-timeout", time.Hour, "give up waiting for an image to become Available after this long (a later run waits for it again)")
	f.DurationVar(&req.PollInterval, "poll-interval", 15*time.Second, "time between DescribeImages calls while waiting")
	f.StringVar(&manifestPath, "manifest", "", "manifest of the image (default: <name>.manifest.json beside it)")
	f.BoolVar(&checkProvenance, "provenance", false, "also check the signed provenance, as drover verify --provenance does (needed for a qcow2)")
	f.StringVar(&pubKey, "pub", "", "public key (PEM) the provenance must be signed with (with --provenance)")
	f.BoolVar(&dryRun, "dry-run", false, "print the plan, after looking up existing images; upload, import, copy and tag nothing")
	f.BoolVar(&asJSON, "json", false, "print progress and the result as JSON events, one per line on stdout (docs/events.md)")
	f.StringVar(&ecsEndpoint, "ecs-endpoint", "", "ECS API endpoint, host:port or URL, for private endpoints and tests (default $DROVER_ECS_ENDPOINT, else the SDK's for --region)")
	f.StringVar(&ossEndpoint, "oss-endpoint", "", "OSS endpoint, host:port or URL, for private endpoints and tests (default $DROVER_OSS_ENDPOINT, else the SDK's for --region)")
	f.Int64Var(&partSize, "part-size", 0, "OSS multipart upload part size in bytes (default: the SDK's)")
	f.StringVar(&checkpointDir, "checkpoint-dir", "", "directory of the upload checkpoint, from which an interrupted upload resumes (default <user cache dir>/drover/upload)")
	f.BoolVar(&keepObject, "keep-object", false, "keep the uploaded object in the bucket once the image is Available (default: deleted)")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	return cmd
}

// problemParts lists the parts the problems are in, each once.
func problemParts(r verifyResult) []string {
	var where []string
	seen := map[string]bool{}
	for _, p := range r.problems {
		if !seen[p.Part] {
			seen[p.Part] = true
			where = append(where, p.Part)
		}
	}
	return where
}

// publishLog prints progress: text lines on stderr, or with --json every
// event, the result last, as one JSON line on stdout (cloud/event), as
// drover rollout prints its own.
type publishLog struct {
	w    io.Writer
	json func(publish.Event) // nil without --json
}

func newPublishLog(stdout, stderr io.Writer, asJSON bool) *publishLog {
	l := &publishLog{w: stderr}
	if asJSON {
		l.json = event.JSONLines(stdout, time.Now)
	}
	return l
}

func (l *publishLog) event(e publish.Event) {
	if l.json != nil {
		l.json(e)
		return
	}
	fmt.Fprintf(l.w, "drover publish: %s\n", e.Message)
}

// writePlan prints the plan on w, or with --json as the last event (plan),
// its Result the plan and what each region gets.
func writePlan(w io.Writer, log *publishLog, p *publish.Plan, decisions map[string]publish.Decision) error {
	if log.json == nil {
		_, err := io.WriteString(w, p.Text(decisions))
		return err
	}
	type region struct {
		Region  string `json:"region"`
		Action  string `json:"action"` // create, reuse, wait; "" when not looked up
		ImageID string `json:"imageId,omitempty"`
	}
	var rs []region
	for _, r := range append([]string{p.Region}, p.CopyTo...) {
		d := decisions[r]
		rs = append(rs, region{r, string(d.Action), d.ImageID})
	}
	log.event(publish.Event{Kind: event.Plan, Message: p.Text(decisions), Result: struct {
		DryRun  bool          `json:"dryRun"`
		Plan    *publish.Plan `json:"plan"`
		Regions []region      `json:"regions"`
	}{true, p, rs}})
	return nil
}

// writeResult prints the image IDs on w, or with --json the last event
// (done), its Result the images.
func writeResult(w io.Writer, log *publishLog, res *publish.Result) error {
	if log.json != nil {
		var where []string
		for _, im := range res.Images {
			where = append(where, im.ImageID+" in "+im.Region)
		}
		log.event(publish.Event{Kind: event.Done, Message: strings.Join(where, ", "), Result: res})
		return nil
	}
	var b strings.Builder
	for i, im := range res.Images {
		if i == 0 {
			fmt.Fprintln(&b, im.ImageID)
		} else {
			fmt.Fprintf(&b, "%s %s\n", im.Region, im.ImageID)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
