//! The features stage whatever the descriptor ([`crate::features::Descriptor`]): HOG patches
//! ([`crate::features`]) or dense SIFT's keypoints, which go the way of descriptors made
//! elsewhere ([`crate::descriptors::Origin::Sift`]). Every caller describes photos for a sample
//! through here (a whole stage, or one node's part of it), so the descriptor the params name is
//! the one computed, here and on nodes alike.

use std::ops::Range;
use std::path::Path;

use crate::descriptors::{self, Keypoints, Origin};
use crate::features::{
    Described, Describers, Descriptor, FeatureParams, FeatureSummary, FeaturesError, Outcome,
    Progress, describe_patches, extract_from, extract_patches,
};
use crate::image_io::{Collection, Photo};
use crate::store::Format;

/// Runs the stage: describes every photo of `collection` into a feature file at `out`, with
/// the descriptor `params` name (dense SIFT: the sample's keypoints drawn as
/// [`FeatureParams::draw`] says).
///
/// `progress` is called after each batch. Nothing appears at `out` (nor its manifests) unless the
/// whole run succeeds.
pub fn extract(
    collection: &Collection,
    params: &FeatureParams,
    out: &Path,
    format: Format,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<FeatureSummary, FeaturesError> {
    match params.descriptor {
        Descriptor::Hog => extract_patches(collection, params, out, format, progress),
        Descriptor::Sift => {
            let sift = params.sift().map_err(|e| descriptors::boxed(e.into()))?;
            let draw = params.draw();
            let compute = |_: &mut Describers, photo: &Photo, size, k: &Keypoints| {
                descriptors::sampled(photo, size, k, draw)
            };
            let origin = Origin::Sift(params, &sift);
            let mut source = descriptors::Here::new(collection, origin, &compute);
            let dims = params.descriptor.dims();
            extract_from(collection, (out, format, dims), &mut source, progress)
        }
    }
}

/// Describes the photos `range` of `collection` (what one node does of a sharded features stage;
/// [`extract_from`] writes the results).
pub fn range(
    collection: &Collection,
    params: &FeatureParams,
    range: Range<usize>,
) -> Vec<Outcome<Described>> {
    match params.descriptor {
        Descriptor::Hog => describe_patches(collection, params, range),
        Descriptor::Sift => {
            let draw = params.draw();
            let compute = |_: &mut Describers, photo: &Photo, size, k: &Keypoints| {
                descriptors::sampled(photo, size, k, draw)
            };
            descriptors::sift_range(collection, params, range, &compute)
        }
    }
}
