// Package v1alpha1 holds the partnerstream.io/v1alpha1 custom resource types.
// +kubebuilder:object:generate=true
// +groupName=partnerstream.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the platform's resources.
	GroupVersion = schema.GroupVersion{Group: "partnerstream.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types with a runtime scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
